// threads.extern-pre.js -- a second --extern-pre-js, only for the pthreads module
// (sdpa_core_mt). Like __sdpaWasmUrl in node_shims.extern-pre.js, the literal
// `new URL('./<worker>.js', import.meta.url)` lets bundlers (Vite) see and emit the pthread
// worker script; `?no-inline` keeps Vite from inlining it as a data: URL (a worker from a data:
// URL has an opaque origin and cannot import this module). __sdpaModuleUrl is this module's own
// URL, which each worker imports (3.1.6 otherwise imports './<name>.mjs' relative to the
// worker, wrong once a bundler renames files). CMake runs this file through configure_file(@ONLY).
var __sdpaWorkerUrl = new URL('./@SDPA_WORKER_FILE@?no-inline', import.meta.url);
var __sdpaModuleUrl = import.meta.url;
