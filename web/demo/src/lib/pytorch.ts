// "Copy as PyTorch": a Python snippet that recomputes an attention call in float64, stage by stage,
// and checks it against PyTorch's own kernels: F.scaled_dot_product_attention (PyTorch ≥ 2.1, for its
// `scale=`) where a boolean or additive attn_mask expresses the call, and FlexAttention (PyTorch ≥ 2.5:
// score_mod / mask_mod) for the package's variants SDPA has no option for. Each variant is one entry of
// TORCH_VARIANTS, in the package's pipeline order (scale → softcap → ALiBi → masks → softmax).
import type { AttentionOptions } from 'sdpa-web';
import { size, type NumTensor } from './tensors';

/** A Python list literal of a tensor (7 significant digits: float32 noise such as 0.80000001 disappears). */
export const pyList = (t: NumTensor): string => {
  const fmtN = (x: number) => (Number.isInteger(x) ? `${x}.` : `${+x.toPrecision(7)}`);
  const rec = (off: number, shape: readonly number[]): string => {
    if (shape.length === 0) return fmtN(t.data[off]);
    const inner = size(shape.slice(1));
    return `[${Array.from({ length: shape[0] }, (_, i) => rec(off + i * inner, shape.slice(1))).join(', ')}]`;
  };
  return rec(0, t.shape);
};
const pyInts = (a: ArrayLike<number>) => `[${Array.from(a).join(', ')}]`;

/** The call's sizes, for the entries. */
interface Dims {
  lq: number;
  lk: number;
}

/**
 * How one option of the package reads in PyTorch. Python names in scope: `s` (the score so far), `p`
 * (the query's position, i + o), `j` (the key's index), as tensors in the explicit computation and as
 * FlexAttention's index scalars inside score_mod / mask_mod.
 */
interface TorchVariant {
  /** What the snippet calls it, e.g. "softcap". */
  name: string;
  active(o: AttentionOptions): boolean;
  /** Python lines that define what the expressions read (constants, id tensors). */
  setup?(o: AttentionOptions, d: Dims): string[];
  /** The new score from `s` (a score_mod step). */
  score?(o: AttentionOptions): string;
  /** As an additive bias independent of `s` (SDPA's float attn_mask can take it), where there is one. */
  bias?(o: AttentionOptions): string;
  /** Whether query position `p` may see key `j` (a mask_mod condition). */
  visible?(o: AttentionOptions, d: Dims): string;
  /** This variant's extra logit in each row's softmax (attention sinks), where it has one. */
  sink?(o: AttentionOptions): string;
  /** True when PyTorch's scaled_dot_product_attention can take it (as a bool or additive attn_mask). */
  sdpa: boolean;
}

const softcapOf = (o: AttentionOptions) => o.softcap!;
const alibiSlope = (o: AttentionOptions) => (o.alibiSlopes ? o.alibiSlopes[0] : 2 ** -8); // one head: m = 2^(−8·1/1)

export const TORCH_VARIANTS: TorchVariant[] = [
  { name: 'softcap', active: (o) => !!o.softcap, score: (o) => `${softcapOf(o)} * torch.tanh(s / ${softcapOf(o)})`, sdpa: false },
  { name: 'ALiBi', active: (o) => !!o.alibi || !!o.alibiSlopes, setup: (o) => [`m = ${alibiSlope(o)}  # ALiBi slope of the head`], score: () => 's - m * (p - j).abs()', bias: () => '-m * (p - j).abs()', sdpa: true },
  {
    name: 'attn_mask',
    active: (o) => !!o.attnMask,
    setup: (o) => [`mask = torch.tensor(${pyList({ data: Array.from(o.attnMask!.data), shape: o.attnMask!.shape })}).bool()  # True = may attend`],
    visible: () => 'mask[i_q, j]',
    sdpa: true,
  },
  { name: 'causal', active: (o) => !!o.isCausal, visible: () => 'j <= p', sdpa: true },
  {
    name: 'sliding window',
    active: (o) => !!o.window,
    visible: (o) => [o.window!.left !== undefined ? `j >= p - ${o.window!.left}` : '', o.window!.right !== undefined ? `j <= p + ${o.window!.right}` : ''].filter(Boolean).map((c, _, all) => (all.length > 1 ? `(${c})` : c)).join(' & ') || 'j >= 0',
    sdpa: true,
  },
  {
    name: 'documents',
    active: (o) => !!o.queryDocuments,
    setup: (o) => [`q_doc = torch.tensor(${pyInts(o.queryDocuments!.data)})`, `kv_doc = torch.tensor(${pyInts(o.keyDocuments!.data)})`],
    visible: () => 'q_doc[i_q] == kv_doc[j]',
    sdpa: true,
  },
  { name: 'key lengths', active: (o) => !!o.keyLengths, visible: (o) => `j < ${o.keyLengths![0]}`, sdpa: true },
  { name: 'attention sink', active: (o) => !!o.sinks, sink: (o) => (Number.isFinite(o.sinks![0]) ? `${o.sinks![0]}` : "float('-inf')"), sdpa: false },
];

/** The query's position offset o (query i sits at p = i + o), as the package defines it. */
function positionOffset(o: AttentionOptions, d: Dims): number {
  const c = o.isCausal;
  if (c === true || c === 'top-left') return 0;
  if (typeof c === 'object' && c) return c.offset;
  // Bottom-right, and no causality: the last query sits at the last (valid) key.
  return (o.keyLengths ? o.keyLengths[0] : d.lk) - d.lq;
}

export interface PytorchOptions {
  title: string;
  /** The call's options (masks, causality, the variants); `scale` null or absent: 1/√E. */
  options?: AttentionOptions;
  extraLines?: string[];
  projections?: { x: NumTensor; wq: NumTensor; wk: NumTensor; wv: NumTensor };
}

/** The snippet for one 2-D attention call q [Lq × E], k [Lk × E], v [Lk × Ev]. */
export function pytorchAttention(q: NumTensor, k: NumTensor, v: NumTensor, o: PytorchOptions): string {
  const opts = o.options ?? {};
  const d: Dims = { lq: q.shape[q.shape.length - 2], lk: k.shape[k.shape.length - 2] };
  const variants = TORCH_VARIANTS.filter((x) => x.active(opts));
  const onlyPlain = variants.every((x) => x.name === 'attn_mask' || (x.name === 'causal' && positionOffset(opts, d) === 0 && !opts.keyLengths));
  const flex = !onlyPlain && variants.some((x) => x.score || x.visible);
  const sdpa = variants.every((x) => x.sdpa);
  const lines = [
    `# ${o.title}`,
    `# Needs PyTorch >= 2.1 (scaled_dot_product_attention's scale=)${flex ? '; the FlexAttention form needs PyTorch >= 2.5' : ''}.`,
    'import math, torch',
    'import torch.nn.functional as F',
    ...(flex ? ['from torch.nn.attention.flex_attention import flex_attention, create_block_mask'] : []),
    'torch.set_printoptions(precision=4, sci_mode=False)',
    '',
  ];
  const p = o.projections;
  if (p) lines.push(`X = torch.tensor(${pyList(p.x)}, dtype=torch.float64)`, `W_Q = torch.tensor(${pyList(p.wq)}, dtype=torch.float64)`, `W_K = torch.tensor(${pyList(p.wk)}, dtype=torch.float64)`, `W_V = torch.tensor(${pyList(p.wv)}, dtype=torch.float64)`, 'q, k, v = X @ W_Q, X @ W_K, X @ W_V', 'print("Q =", q, "K =", k, "V =", v, sep="\\n")');
  else lines.push(`q = torch.tensor(${pyList(q)}, dtype=torch.float64)`, `k = torch.tensor(${pyList(k)}, dtype=torch.float64)`, `v = torch.tensor(${pyList(v)}, dtype=torch.float64)`);
  const scale = opts.scale ?? 1 / Math.sqrt(q.shape[q.shape.length - 1]);
  lines.push(`scale = ${opts.scale == null ? `1 / math.sqrt(q.shape[-1])  # ${+scale.toPrecision(6)}` : +scale.toPrecision(9)}`);
  lines.push(`Lq, Lk = ${d.lq}, ${d.lk}`);
  for (const x of variants) if (x.setup) lines.push(...x.setup(opts, d));
  const visible = variants.filter((x) => x.visible).map((x) => `(${x.visible!(opts, d)})`);
  const scoreSteps = variants.filter((x) => x.score);
  const sink = variants.find((x) => x.sink);
  // Positions: query row i_q sits at p = i_q + o; key j at j.
  lines.push('', `i_q = torch.arange(Lq)[:, None]; j = torch.arange(Lk)[None, :]`, `p = i_q + ${positionOffset(opts, d)}  # each query's position`);
  lines.push('', 'scores = q @ k.transpose(-2, -1)', 'scaled = scores * scale', 's = scaled');
  for (const x of scoreSteps) lines.push(`s = ${x.score!(opts)}  # ${x.name}`);
  lines.push(visible.length ? `visible = ${visible.join(' & ')}` : 'visible = torch.ones(Lq, Lk, dtype=torch.bool)');
  lines.push("masked = s.masked_fill(~visible, float('-inf'))");
  if (sink) lines.push(`weights = torch.softmax(torch.cat([masked, torch.full((Lq, 1), ${sink.sink!(opts)}, dtype=torch.float64)], -1), -1)[:, :-1].nan_to_num(0.0)  # ${sink.name}: one more logit, no value`);
  else lines.push('weights = torch.softmax(masked, dim=-1).nan_to_num(0.0)  # fully masked rows -> 0');
  lines.push('output = weights @ v');
  lines.push('print("QK^T =", scores, "scaled =", scaled, "weights =", weights, "output =", output, sep="\\n")');
  if (sdpa) {
    const bias = variants.filter((x) => x.bias);
    const maskArg = bias.length
      ? ['attn_mask = ' + bias.map((x) => `(${x.bias!(opts)})`).join(' + ') + ".masked_fill(~visible, float('-inf'))  # additive mask"]
      : visible.length ? ['attn_mask = visible'] : [];
    lines.push(...maskArg, `ref = F.scaled_dot_product_attention(q, k, v${maskArg.length ? ', attn_mask=attn_mask' : ''}, scale=scale)`);
    lines.push('print("max |output - F.scaled_dot_product_attention| =", (output - ref).nan_to_num(0.0).abs().max().item())');
  }
  if (flex) {
    lines.push('', '# The same call as FlexAttention: score_mod changes each score, mask_mod says which keys a query sees.');
    if (scoreSteps.length) {
      lines.push('def score_mod(score, b, h, q_idx, kv_idx):', `    s, p, j = score, q_idx + ${positionOffset(opts, d)}, kv_idx`);
      for (const x of scoreSteps) lines.push(`    s = ${x.score!(opts)}  # ${x.name}`);
      lines.push('    return s');
    }
    if (visible.length) {
      lines.push('def mask_mod(b, h, q_idx, kv_idx):', `    i_q, p, j = q_idx, q_idx + ${positionOffset(opts, d)}, kv_idx`, `    return ${visible.join(' & ')}`);
      lines.push('block_mask = create_block_mask(mask_mod, None, None, Lq, Lk, device="cpu")');
    }
    lines.push(`flex = flex_attention(q[None, None], k[None, None], v[None, None]${scoreSteps.length ? ', score_mod=score_mod' : ''}${visible.length ? ', block_mask=block_mask' : ''}, scale=scale)[0, 0]`);
    if (sink) lines.push(`# ${sink.name}: FlexAttention has no sink logit; the explicit softmax above is the reference.`);
    else lines.push('print("max |output - flex_attention| =", (output - flex).abs().max().item())');
  }
  if (!sdpa && !flex) lines.push(`# ${variants.filter((x) => !x.sdpa).map((x) => x.name).join(', ')}: neither scaled_dot_product_attention nor FlexAttention has it; the explicit computation above is the reference.`);
  if (o.extraLines) lines.push(...o.extraLines);
  return lines.join('\n');
}
