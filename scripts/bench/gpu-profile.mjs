// The GPU time of each kernel of one call, through timestamp queries (`--profile`).
// While a profiled call runs, each compute pass that the device's command encoders begin is
// replaced by one pass per dispatch, each with timestampWrites at its start and end, and the
// pass's pipeline label (the library's pipeline key) names the kernel. Separate passes add
// their boundaries (a little time) and order dispatches that one pass would have left free to
// overlap: in sdpa-web's passes each dispatch reads what the one before wrote, so WebGPU orders
// them already. Needs a device with 'timestamp-query'; dawn.node quantizes timestamps unless
// its toggle is off (SDPA_DAWN_FLAGS=disable-dawn-features=timestamp_quantization).

const QUERY_PAIRS = 2048;

/** The kernel's name and shape from a pipeline key: "flash-tiled:e64:ev64:bk64:rows16:…" → "flash-tiled bk64 rows16". */
function kernelName(label) {
  const [name, ...fields] = (label || 'unlabelled').split(':');
  return [name, ...fields.filter((f) => /^(rows|bk|bq|tk|tq|lanes|groups)\d+$|^split$/.test(f))].join(' ');
}

/**
 * A profiler on `device`, or { unavailable } where the device lacks 'timestamp-query'.
 * profile(run) runs `run` once and returns { kernels: [{ kernel, dispatches, ms }] (slowest
 * first), gpuMs (their sum), spanMs (the first dispatch's start to the last one's end) }.
 */
export function gpuProfiler(device) {
  if (!device.features.has('timestamp-query')) return { unavailable: "the device has no 'timestamp-query'" };
  const querySet = device.createQuerySet({ type: 'timestamp', count: 2 * QUERY_PAIRS });
  return {
    async profile(run) {
      const dispatches = [];  // { kernel, at: its first query }
      const readbacks = [];   // { read, resolved, first, count }
      let next = 0;
      const onePassEach = (encoder) => {
        let pipeline;
        const groups = new Map();
        return {
          setPipeline(p) { pipeline = p; },
          setBindGroup(index, group, ...offsets) { groups.set(index, [group, ...offsets]); },
          dispatchWorkgroups(...size) {
            if (next + 2 > 2 * QUERY_PAIRS) throw new Error(`gpu-profile: more than ${QUERY_PAIRS} dispatches in one call`);
            const pass = encoder.beginComputePass({ timestampWrites: { querySet, beginningOfPassWriteIndex: next, endOfPassWriteIndex: next + 1 } });
            pass.setPipeline(pipeline);
            for (const [index, [group, ...offsets]] of groups) pass.setBindGroup(index, group, ...offsets);
            pass.dispatchWorkgroups(...size);
            pass.end();
            dispatches.push({ kernel: kernelName(pipeline.label), at: next });
            next += 2;
          },
          end() {},
        };
      };
      const resolveQueries = (encoder, first) => {
        const count = next - first;
        if (count === 0) return;
        const resolved = device.createBuffer({ size: 8 * count, usage: GPUBufferUsage.QUERY_RESOLVE | GPUBufferUsage.COPY_SRC });
        const read = device.createBuffer({ size: 8 * count, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
        encoder.resolveQuerySet(querySet, first, count, resolved, 0);
        encoder.copyBufferToBuffer(resolved, 0, read, 0, 8 * count);
        readbacks.push({ read, resolved, first, count });
      };
      const createCommandEncoder = device.createCommandEncoder;
      device.createCommandEncoder = (...args) => {
        const encoder = createCommandEncoder.apply(device, args);
        const first = next;
        return new Proxy(encoder, {
          get(target, key) {
            if (key === 'beginComputePass') return () => onePassEach(target);
            if (key === 'finish') return (...a) => (resolveQueries(target, first), target.finish(...a));
            const value = Reflect.get(target, key);
            return typeof value === 'function' ? value.bind(target) : value;
          },
        });
      };
      try {
        await run();
        await device.queue.onSubmittedWorkDone();
      } finally {
        device.createCommandEncoder = createCommandEncoder;
      }
      const stamps = new Map();
      for (const { read, resolved, first, count } of readbacks) {
        await read.mapAsync(GPUMapMode.READ);
        const ns = new BigUint64Array(read.getMappedRange());
        for (let i = 0; i < count; i++) stamps.set(first + i, ns[i]);
        read.unmap();
        read.destroy();
        resolved.destroy();
      }
      const byKernel = new Map();
      let start, end;
      for (const { kernel, at } of dispatches) {
        const [t0, t1] = [stamps.get(at), stamps.get(at + 1)];
        if (t0 === undefined || t1 === undefined) throw new Error(`gpu-profile: no timestamps for a dispatch of ${kernel} (a command buffer finished outside the profiled call?)`);
        const k = byKernel.get(kernel) ?? { kernel, dispatches: 0, ms: 0 };
        k.dispatches++;
        k.ms += Number(t1 - t0) / 1e6;
        byKernel.set(kernel, k);
        start = start === undefined || t0 < start ? t0 : start;
        end = end === undefined || t1 > end ? t1 : end;
      }
      const kernels = [...byKernel.values()].sort((a, b) => b.ms - a.ms);
      return { kernels, gpuMs: kernels.reduce((s, k) => s + k.ms, 0), spanMs: start === undefined ? 0 : Number(end - start) / 1e6 };
    },
    dispose: () => querySet.destroy(),
  };
}

/** One line per kernel: "    12.345 ms  3×  flash-tiled rows16 bk64". */
export function profileLines({ kernels, gpuMs, spanMs }) {
  return [
    `GPU ${gpuMs.toFixed(3)} ms in ${kernels.reduce((s, k) => s + k.dispatches, 0)} dispatches (first start to last end ${spanMs.toFixed(3)} ms)`,
    ...kernels.map((k) => `${k.ms.toFixed(3).padStart(10)} ms  ${String(k.dispatches).padStart(3)}×  ${k.kernel}`),
  ];
}
