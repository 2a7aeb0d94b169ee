import type { App } from '../lib/app'; export function mountScalingLab(_app: App): void {}
