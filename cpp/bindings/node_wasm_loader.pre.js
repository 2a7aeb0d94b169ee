// node_wasm_loader.pre.js -- linked with --pre-js (runs inside the factory,
// where `Module` is the object passed to createSdpaModule()). CMake runs it
// through configure_file(@ONLY) to substitute the wasm file name.
//
// Why:
// 1. Node: 3.1.6 instantiates the .wasm with the global fetch() whenever it
//    exists -- and node 20 has one -- passing it a file *path*, which fails.
//    Under node we read the bytes with fs and hand them over as
//    Module.wasmBinary, which skips the fetch path entirely.
// 2. Bundlers: 3.1.6 resolves the .wasm relative to the script's directory at
//    run time, which Vite cannot see, so `vite build` would not emit the file.
//    We resolve it to __sdpaWasmUrl instead, defined in
//    node_shims.extern-pre.js as `new URL('./<name>.wasm', import.meta.url)`
//    (a hashed asset after `vite build`, a plain URL in the dev server).
// A caller-supplied Module.locateFile / wasmBinary / instantiateWasm wins.
(function () {
  var wasmUrl = __sdpaWasmUrl;
  var isNode = typeof process === 'object' && process !== null &&
      typeof process.versions === 'object' && process.versions !== null &&
      typeof process.versions.node === 'string';
  if (isNode) {
    if (!Module['wasmBinary'] && !Module['instantiateWasm']) {
      var fs = process.getBuiltinModule('fs');
      var file = Module['locateFile']
          ? Module['locateFile']('@SDPA_WASM_FILE@', '')
          : process.getBuiltinModule('url').fileURLToPath(wasmUrl);
      if (typeof file === 'string' && file.startsWith('file:')) {
        file = process.getBuiltinModule('url').fileURLToPath(file);
      }
      Module['wasmBinary'] = fs.readFileSync(file);
    }
  } else if (!Module['locateFile']) {
    Module['locateFile'] = function (path, prefix) {
      return path === '@SDPA_WASM_FILE@' ? wasmUrl.href : prefix + path;
    };
  }
})();
