// threads.extern-pre.js -- a second --extern-pre-js, only for the pthreads module
// (sdpa_core_mt). Like __sdpaWasmUrl in node_shims.extern-pre.js, the literal
// `new URL('./<worker>.js', import.meta.url)` lets bundlers (Vite) see and emit the pthread
// worker script. CMake runs this file through configure_file(@ONLY).
var __sdpaWorkerUrl = new URL('./@SDPA_WORKER_FILE@', import.meta.url);
