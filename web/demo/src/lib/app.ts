// Shared page state: the library instance, the current worked example, and state kept in the URL.
import type { Attention, BackendChoice, BackendInfo, CreateAttentionOptions } from 'sdpa-web';

export interface App {
  /** The page-wide instance (backend 'auto'). */
  attn: Attention;
  /** Create another instance (playground backend switch, benchmark); the caller disposes it. */
  create(backend: BackendChoice): Promise<Attention>;
  /** Create an instance with more options (a build: relaxedSimd); the caller disposes it. */
  createWith(options: CreateAttentionOptions): Promise<Attention>;
  /** Report an error visibly (never only to the console). */
  error(where: string, e: unknown): void;
  /** The library's backend list (`attn.availableBackends`), with its reasons. */
  backends: BackendInfo[];
  /** Load and mount a section by its id (sections load when scrolled to; another may need one first). */
  open(section: string): Promise<void>;
}

/**
 * Whether the page offers a backend for explicit selection: every backend the library lists as
 * available, and WebGPU wherever the browser has `navigator.gpu` even when 'auto' passed over it
 * (a software fallback adapter, which `backend: 'webgpu'` uses anyway). Whether a device can be
 * had is only known by asking: `createAttention({ backend: 'webgpu' })` rejects with the reason.
 */
export function selectable(b: BackendInfo): boolean {
  return b.available || (b.name === 'webgpu' && typeof navigator !== 'undefined' && 'gpu' in navigator && !!navigator.gpu);
}

/**
 * How to label the WebGPU backend: 'auto' passing over a software fallback adapter says so (and
 * names it) in its `fallbackReason`; SwiftShader runs the GPU kernels on the CPU.
 */
export function webgpuLabel(attn: Attention): string {
  const why = attn.backend === 'webgpu' ? '' : (attn.fallbackReason ?? '');
  if (/swiftshader/i.test(why)) return 'webgpu — SwiftShader (CPU emulation)';
  if (/software fallback/i.test(why)) return 'webgpu — software adapter (CPU emulation)';
  return 'webgpu';
}

/** Read a parameter from the page URL's query string. */
export function getParam(name: string): string | null {
  return new URLSearchParams(location.search).get(name);
}

/** An integer URL parameter that passes `ok`, else `fallback`. */
export function intParam(name: string, ok: (n: number) => boolean, fallback: number): number {
  const raw = getParam(name);
  const n = raw === null ? Number.NaN : Number(raw);
  return Number.isInteger(n) && ok(n) ? n : fallback;
}

/** Write parameters into the URL's query string without reloading (null removes one). */
export function setParams(params: Record<string, string | null>): void {
  const sp = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(params)) {
    if (v === null) sp.delete(k);
    else sp.set(k, v);
  }
  const q = sp.toString();
  // replaceState costs tens of milliseconds: skipped when nothing changed (most recomputes).
  if (q !== location.search.slice(1)) history.replaceState(null, '', `${location.pathname}${q ? `?${q}` : ''}${location.hash}`);
}

type Listener = (id: string) => void;
const listeners: Listener[] = [];
let currentId = '';

export const currentExample = {
  get id(): string {
    return currentId;
  },
  set(id: string): void {
    if (id === currentId) return;
    currentId = id;
    setParams({ ex: id });
    for (const l of listeners) l(id);
  },
  init(id: string): void {
    currentId = id;
  },
  onChange(l: Listener): void {
    listeners.push(l);
  },
};
