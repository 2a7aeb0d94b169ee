// node cpp/bindings/embed_pthread_worker.js <module.mjs> <module.worker.js>
//
// Run after the link of each pthreads module: puts the text of Emscripten's pthread worker script
// into the module, in place of the placeholder string of threads.extern-pre.js. Browsers then
// start each worker from a Blob URL of that text (threads.pre.js): no worker file is served,
// rewritten by a dev server (Vite's makes it an ES module, which a classic worker cannot parse) or
// emitted by a bundler. Node keeps loading the .worker.js file itself. A module without exactly
// one placeholder stops the build.
import { readFileSync, writeFileSync } from 'node:fs';

const [moduleFile, workerFile] = process.argv.slice(2);
if (!moduleFile || !workerFile) throw new Error('usage: embed_pthread_worker.js <module.mjs> <module.worker.js>');
const PLACEHOLDER = "'__SDPA_PTHREAD_WORKER_SOURCE__'";
const source = readFileSync(moduleFile, 'utf8');
const parts = source.split(PLACEHOLDER);
if (parts.length !== 2) throw new Error(`${moduleFile}: expected the placeholder ${PLACEHOLDER} once, found it ${parts.length - 1} times`);
writeFileSync(moduleFile, parts.join(JSON.stringify(readFileSync(workerFile, 'utf8'))));
