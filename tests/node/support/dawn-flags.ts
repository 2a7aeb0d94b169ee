/**
 * The dawn.node options of the Node tests' WebGPU instances (support/webgpu.ts, and the bench CLI
 * that tests/node/bench.test.ts spawns): SDPA_DAWN_FLAGS (comma-separated dawn.node options, e.g.
 * `enable-dawn-features=vulkan_enable_f16_on_nvidia`) after one toggle of their own.
 *
 * WebGPU zero-initializes workgroup memory. Where the Vulkan driver cannot do it for Dawn
 * (SwiftShader lacks VK_KHR_zero_initialize_workgroup_memory), Dawn adds a loop and a barrier to
 * every kernel, and SwiftShader compiles such a pipeline about ten times slower: 50 s against 5 s
 * for the first 30 calls of the shared suite, nearly all of it compiling. The tests skip that
 * prologue (`disable_workgroup_init`): the kernels write workgroup memory before they read it, so
 * every suite passes without the zeroes. The browser tests (tests/browser/webgpu-*) run Chromium's
 * defaults, with them. onnxruntime-web's WebGPU GroupQueryAttention does rely on the zeroes (the
 * spec allows it): without them its decode step on SwiftShader was wrong (error 0.75 at L = 512),
 * so a test that runs it must not take these flags (bench.test.ts runs only its prefill graph).
 */
export function testDawnFlags(): string[] {
  return ['enable-dawn-features=disable_workgroup_init', ...(process.env.SDPA_DAWN_FLAGS?.split(',').filter(Boolean) ?? [])];
}
