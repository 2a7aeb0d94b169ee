// node_shims.extern-pre.js -- linked with --extern-pre-js, i.e. placed at the
// top level of the generated ES module, outside the factory function.
//
// Why: Emscripten 3.1.6's -sEXPORT_ES6 output still uses CommonJS globals
// (`require('fs')`, `require('path')`, `__dirname`) in its node code path.
// Those do not exist in a Node ES module, so the output throws when imported
// by Node ESM / Vitest. Here we define them, module-scoped, from
// import.meta.url -- only under Node (process.getBuiltinModule needs
// node >= 20.16, hence package.json engines). In browsers, workers and Vite's
// bundle `process` is undefined and nothing happens (the emitted code only
// touches these names under ENVIRONMENT_IS_NODE).
//
// It also holds the wasm URL for node_wasm_loader.pre.js: the literal
// `new URL('./<name>.wasm', import.meta.url)` is the pattern Vite (and
// webpack/rollup/esbuild plugins) recognise, so `vite build` emits the .wasm
// as a hashed asset. It must live here, not in the --pre-js: 3.1.6's JS
// optimizer (acorn + terser, run at -O3 / with MAXIMUM_MEMORY=4GB) crashes on
// `import.meta` ("Cannot read properties of undefined (reading 'print')"),
// while --extern-pre-js code bypasses it.
// CMake runs this file through configure_file(@ONLY) for the wasm file name.
var __sdpaWasmUrl = new URL('./@SDPA_WASM_FILE@', import.meta.url);
var require, __filename, __dirname;
if (typeof process === 'object' && process !== null &&
    typeof process.versions === 'object' && process.versions !== null &&
    typeof process.versions.node === 'string' &&
    typeof process.getBuiltinModule === 'function') {
  require = process.getBuiltinModule('module').createRequire(import.meta.url);
  __filename = process.getBuiltinModule('url').fileURLToPath(import.meta.url);
  __dirname = process.getBuiltinModule('path').dirname(__filename);
}
