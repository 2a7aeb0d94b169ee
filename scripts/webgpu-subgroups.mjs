// SDPA_WEBGPU_SUBGROUPS=0: a WebGPU entry point whose adapters are presented without
// subgroups, so that no device requested through it has them and sdpa-web's plan takes its
// workgroup-memory kernels. One rule for the Node test suites (tests/node/support/webgpu.ts),
// the bench's WebGPU engines (scripts/bench/engines.mjs) and gpu-check's report.

/**
 * Whether `setting` (the value of SDPA_WEBGPU_SUBGROUPS) withholds 'subgroups': 0 does, 1 or
 * unset does not; any other value throws.
 * @param {string | undefined} setting
 * @returns {boolean}
 */
export function subgroupsWithheld(setting) {
  if (setting === undefined || setting === '' || setting === '1') return false;
  if (setting === '0') return true;
  throw new Error(`SDPA_WEBGPU_SUBGROUPS must be 0 or 1 (got ${JSON.stringify(setting)})`);
}

/**
 * `source` (navigator.gpu or dawn.node's) with every adapter presented without subgroups: none of
 * the features that name them ('subgroups', and those Dawn enables 'subgroups' with, such as
 * 'subgroup-size-control') in `adapter.features`, and a `requestDevice` that asks for one rejects
 * as a real adapter lacking it does.
 * @param {GPU} source
 * @returns {GPU}
 */
export function withoutSubgroups(source) {
  const withheld = (name) => name.includes('subgroup');
  const adapterWithout = (adapter) => {
    const features = new Set([...adapter.features].filter((name) => !withheld(name)));
    const requestDevice = (descriptor) => {
      const asked = [...(descriptor?.requiredFeatures ?? [])].find(withheld);
      return asked === undefined
        ? adapter.requestDevice(descriptor)
        : Promise.reject(new TypeError(`requiredFeatures: the adapter does not have '${asked}' (withheld by SDPA_WEBGPU_SUBGROUPS=0)`));
    };
    return forwarding(adapter, { features, requestDevice });
  };
  const requestAdapter = async (options) => {
    const adapter = await source.requestAdapter(options);
    return adapter && adapterWithout(adapter);
  };
  return forwarding(source, { requestAdapter });
}

/** `target` with `overrides` in place of some of its members; its other members read from it (methods bound to it). */
function forwarding(target, overrides) {
  return new Proxy(target, {
    get(object, property) {
      if (typeof property === 'string' && property in overrides) return overrides[property];
      const value = Reflect.get(object, property, object);
      return typeof value === 'function' ? value.bind(object) : value;
    },
  });
}
