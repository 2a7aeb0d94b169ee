// Clock, pause and median shared by the bench's thread probes (two-cores.mjs, wake-after-idle.mjs).

/** Milliseconds on a clock comparable across worker threads (performance.now() alone is per thread). */
export const now = () => performance.timeOrigin + performance.now();

export const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The upper median of `xs` (the middle element of an odd count). */
export const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];
