// Shared page state: the library instance, the current worked example, and state kept in the URL.
import type { AttentionLike } from './compute';

export interface BackendInfo {
  name: string;
  available: boolean;
  reason?: string;
}

export interface App {
  /** The page-wide instance (backend 'auto'). */
  attn: AttentionLike & { fallbackReason?: string; availableBackends?: BackendInfo[] };
  /** Create another instance (playground backend switch, benchmark). */
  create(backend: string): Promise<AttentionLike & { dispose?: () => void; fallbackReason?: string; availableBackends?: BackendInfo[] }>;
  /** Report an error visibly (never only to the console). */
  error(where: string, e: unknown): void;
  /** Every backend the page knows (the library's list, plus WebGPU when this build lacks it), with reasons. */
  backends: BackendInfo[];
}

/** The library's backend list; WebGPU is listed as unavailable, with the reason, when the build has no such backend. */
export function backendList(lib: BackendInfo[] | undefined, fallback: string): BackendInfo[] {
  const list = lib?.length ? lib.map((b) => ({ ...b })) : [{ name: fallback, available: true }];
  if (!list.some((b) => b.name === 'webgpu')) {
    const gpu = typeof navigator !== 'undefined' && 'gpu' in navigator;
    list.unshift({ name: 'webgpu', available: false, reason: `this build of sdpa-web has no WebGPU backend${gpu ? ' (the browser does expose navigator.gpu)' : ' (and this browser exposes no navigator.gpu)'}` });
  }
  return list;
}

/** Read a parameter from the page URL's query string. */
export function getParam(name: string): string | null {
  return new URLSearchParams(location.search).get(name);
}

/** Write parameters into the URL's query string without reloading (null removes one). */
export function setParams(params: Record<string, string | null>): void {
  const sp = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(params)) {
    if (v === null) sp.delete(k);
    else sp.set(k, v);
  }
  const q = sp.toString();
  history.replaceState(null, '', `${location.pathname}${q ? `?${q}` : ''}${location.hash}`);
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
