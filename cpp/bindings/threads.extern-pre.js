// threads.extern-pre.js -- a second --extern-pre-js, only for the pthreads module (sdpa_core_mt).
// __sdpaModuleUrl is this module's own URL, which each pthread worker imports to instantiate the
// module (3.1.6 would import './<name>.mjs' relative to the worker script, wrong once a bundler
// renames files). __sdpaWorkerSource is the text of Emscripten's <name>.worker.js, written in
// place of the placeholder after the link (embed_pthread_worker.js); browsers run it from a Blob
// URL (threads.pre.js), Node runs the file.
var __sdpaModuleUrl = import.meta.url;
var __sdpaWorkerSource = '__SDPA_PTHREAD_WORKER_SOURCE__';
