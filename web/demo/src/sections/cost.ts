import type { App } from '../lib/app'; export function mountCost(_app: App): void {}
