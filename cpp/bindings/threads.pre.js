// threads.pre.js -- --pre-js of the pthreads module only (runs before node_wasm_loader.pre.js).
// 1. Worker pool: linked with -sPTHREAD_POOL_SIZE=Module.sdpaWorkers, so the caller chooses how
//    many workers are preloaded (a worker cannot start while the main thread blocks in a
//    parallel region); default 0 until set.
// 2. Outside node, unless the caller brought its own, install Module.locateFile for both files
//    this module loads: the .wasm and the pthread worker script, at the bundler-visible URLs
//    from the extern-pre-js files (node_wasm_loader.pre.js then leaves locateFile alone).
(function () {
  Module['sdpaWorkers'] = Module['sdpaWorkers'] | 0;
  // 3. What each worker imports to instantiate this module (see threads.extern-pre.js).
  if (!Module['mainScriptUrlOrBlob']) Module['mainScriptUrlOrBlob'] = __sdpaModuleUrl;
  var isNode = typeof process === 'object' && process !== null &&
      typeof process.versions === 'object' && process.versions !== null &&
      typeof process.versions.node === 'string';
  if (!isNode && !Module['locateFile']) {
    Module['locateFile'] = function (path, prefix) {
      if (path === '@SDPA_WORKER_FILE@') return __sdpaWorkerUrl.href;
      if (path === '@SDPA_WASM_FILE@') return __sdpaWasmUrl.href;
      return prefix + path;
    };
  }
})();
