import type { App } from '../lib/app'; export function mountPlayground(_app: App): void {}
