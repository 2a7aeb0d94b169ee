import type { App } from '../lib/app'; export function mountMultihead(_app: App): void {}
