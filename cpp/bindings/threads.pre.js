// threads.pre.js -- --pre-js of the pthreads module only, after node_wasm_loader.pre.js.
// 1. Worker pool: linked with -sPTHREAD_POOL_SIZE=Module.sdpaWorkers, so the caller chooses how
//    many workers are preloaded (a worker cannot start while the main thread blocks in a
//    parallel region); default 0 until set.
// 2. Outside node the loader pre-js installs Module.locateFile; route the worker script to the
//    bundler-visible URL from threads.extern-pre.js.
(function () {
  Module['sdpaWorkers'] = Module['sdpaWorkers'] | 0;
  var previous = Module['locateFile'];
  if (previous && typeof process !== 'object') {
    Module['locateFile'] = function (path, prefix) {
      return path === '@SDPA_WORKER_FILE@' ? __sdpaWorkerUrl.href : previous(path, prefix);
    };
  }
})();
