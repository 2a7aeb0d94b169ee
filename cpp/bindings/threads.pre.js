// threads.pre.js -- --pre-js of the pthreads module only (runs before node_wasm_loader.pre.js).
// 1. Worker pool: linked with -sPTHREAD_POOL_SIZE=Module.sdpaWorkers, so the caller chooses how
//    many workers are preloaded (a worker cannot start while the main thread blocks in a
//    parallel region); default 0 until set.
// 2. What each worker imports to instantiate this module (see threads.extern-pre.js).
// 3. Outside node, unless the caller brought its own, install Module.locateFile for both files
//    this module asks for: the .wasm at the bundler-visible URL of node_shims.extern-pre.js, and
//    the pthread worker script as a Blob URL of its embedded text. A Blob URL worker has this
//    page's origin and cross-origin isolation, so it may import this module; no bundler or dev
//    server touches it. Before the worker script runs, a line makes an unhandled rejection in the
//    worker (e.g. importing this module failed) an error that its Worker object reports, so the
//    caller learns at once instead of waiting for a worker that never loads.
(function () {
  Module['sdpaWorkers'] = Module['sdpaWorkers'] | 0;
  if (!Module['mainScriptUrlOrBlob']) Module['mainScriptUrlOrBlob'] = __sdpaModuleUrl;
  var isNode = typeof process === 'object' && process !== null &&
      typeof process.versions === 'object' && process.versions !== null &&
      typeof process.versions.node === 'string';
  if (!isNode && !Module['locateFile']) {
    var workerUrl;
    Module['locateFile'] = function (path, prefix) {
      if (path === '@SDPA_WORKER_FILE@') {
        workerUrl = workerUrl || URL.createObjectURL(new Blob([
          "self.addEventListener('unhandledrejection', function (e) { throw e.reason; });\n",
          __sdpaWorkerSource,
        ], { type: 'text/javascript' }));
        return workerUrl;
      }
      if (path === '@SDPA_WASM_FILE@') return __sdpaWasmUrl.href;
      return prefix + path;
    };
  }
})();
