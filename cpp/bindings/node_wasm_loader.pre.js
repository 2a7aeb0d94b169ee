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
// 3. Browsers: Module.instantiateWasm fetches and instantiates the .wasm, so a
//    file that cannot be fetched (a 404: a bundler that did not emit it) is
//    reported as that, with its URL, instead of 3.1.6's abort message.
// A caller-supplied Module.locateFile / wasmBinary / instantiateWasm wins (a
// pthread worker brings its own instantiateWasm).
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
      try {
        Module['wasmBinary'] = fs.readFileSync(file);
      } catch (e) {
        throw new Error('sdpa-web: its WebAssembly file ' + file + ' could not be read: ' + e.message, { cause: e });
      }
    }
    return;
  }
  if (!Module['locateFile']) {
    Module['locateFile'] = function (path, prefix) {
      return path === '@SDPA_WASM_FILE@' ? wasmUrl.href : prefix + path;
    };
  }
  if (Module['wasmBinary'] || Module['instantiateWasm']) return;
  Module['instantiateWasm'] = function (imports, receiveInstance) {
    var url = Module['locateFile']('@SDPA_WASM_FILE@', '');
    fetch(url, { credentials: 'same-origin' }).then(function (response) {
      if (!response.ok) {
        throw new Error('sdpa-web: its WebAssembly file is missing: ' + url + ' (HTTP ' + response.status + ' ' + response.statusText + ')');
      }
      // Streaming compiles while the file downloads; it needs the application/wasm MIME type.
      if (typeof WebAssembly.instantiateStreaming === 'function' &&
          /^application\/wasm\b/.test(response.headers.get('Content-Type') || '')) {
        return WebAssembly.instantiateStreaming(response, imports);
      }
      return response.arrayBuffer().then(function (bytes) { return WebAssembly.instantiate(bytes, imports); });
    }, function (e) {
      throw new Error('sdpa-web: its WebAssembly file ' + url + ' could not be fetched: ' + e, { cause: e });
    }).then(function (result) {
      receiveInstance(result.instance, result.module);
    }).catch(readyPromiseReject);
    return {};
  };
})();
