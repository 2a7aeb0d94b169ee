// The attention calls' options are declared once, in cpp/bindings/attention_options.def; the
// core reads and checks them. These records tie that declaration to the public types both ways:
// each must list every key of its type (TypeScript rejects a missing or an extra key), and the
// test fails when the declaration and the type disagree.
import { describe, expect, it } from 'vitest';
import { createAttention, type AttentionOptions, type BackwardOptions, type TraceOptions, type VariantOptions } from 'sdpa-web';

const forward: Record<keyof AttentionOptions, true> = {
  attnMask: true, isCausal: true, scale: true, softcap: true, keyLengths: true, window: true, alibi: true, alibiSlopes: true,
  sinks: true, queryDocuments: true, keyDocuments: true, enableGqa: true, returnScores: true, returnWeights: true,
  returnLogSumExp: true, out: true, outputLocation: true, outputDtype: true,
};
const backward: Record<keyof BackwardOptions, true> = {
  attnMask: true, isCausal: true, scale: true, softcap: true, keyLengths: true, window: true, alibi: true, alibiSlopes: true,
  sinks: true, queryDocuments: true, keyDocuments: true, enableGqa: true, output: true, logSumExp: true, returnAttnMaskGrad: true,
  outputLocation: true,
};
const trace: Record<keyof TraceOptions, true> = {
  attnMask: true, isCausal: true, scale: true, softcap: true, keyLengths: true, window: true, alibi: true, alibiSlopes: true,
  sinks: true, queryDocuments: true, keyDocuments: true, enableGqa: true, batch: true, head: true, row: true,
};
const modules: Record<keyof VariantOptions, true> = {
  softcap: true, keyLengths: true, window: true, alibi: true, alibiSlopes: true, sinks: true, queryDocuments: true, keyDocuments: true,
};

describe('option declarations', () => {
  it('the core knows exactly the options of each public type', async () => {
    const attn = await createAttention({ backend: 'scalar' });
    const names = (attn as unknown as { module: { optionNames(): Record<string, string[]> } }).module.optionNames();
    const sorted = (list: Iterable<string>) => [...list].sort();
    expect(sorted(names.forward!)).toEqual(sorted(Object.keys(forward)));
    expect(sorted(names.backward!)).toEqual(sorted(Object.keys(backward)));
    expect(sorted(names.trace!)).toEqual(sorted(Object.keys(trace)));
    expect(sorted(names.modules!)).toEqual(sorted(Object.keys(modules)));
    attn.dispose();
  });

  it('an unknown option is a TypeError naming the closest declared one, on every call', async () => {
    const attn = await createAttention({ backend: 'scalar' });
    const t = { data: new Float32Array(4), shape: [2, 2] };
    expect(() => attn.scaledDotProductAttentionSync(t, t, t, { isCasual: true } as never)).toThrow(/^unknown option 'isCasual' of scaledDotProductAttentionSync; did you mean 'isCausal'\? \(known: attnMask, /);
    await expect(attn.scaledDotProductAttentionBackward(t, t, t, t, { returnWeights: true } as never)).rejects.toThrow(/^unknown option 'returnWeights' of scaledDotProductAttentionBackward/);
    expect(() => attn.traceOnlineSoftmax(t, t, t, { row: 0, rows: 1 } as never)).toThrow(/^unknown option 'rows' of traceOnlineSoftmax; did you mean 'row'/);
    expect(() => attn.referenceAttention(t, t, t, { window: { lft: 1 } } as never)).toThrow(/^unknown option 'lft' of window; did you mean 'left'/);
    attn.dispose();
  });

  it('the reference calls reject the output options they cannot honour, never ignore them', async () => {
    const attn = await createAttention({ backend: 'scalar' });
    const t = { data: new Float32Array([1, 2, 3, 4]), shape: [2, 2] };
    const out = new Float32Array(4).fill(7);
    expect(() => attn.referenceAttention(t, t, t, { out })).toThrow(/^referenceAttention returns new arrays: out is for scaledDotProductAttention/);
    await expect(attn.explain(t, t, t, { out })).rejects.toThrow(/^explain returns new arrays: out is for scaledDotProductAttention/);
    expect(out.every((x) => x === 7)).toBe(true);
    expect(() => attn.referenceAttention(t, t, t, { outputDtype: 'float16' })).toThrow(/^referenceAttention returns float64 arrays: outputDtype/);
    await expect(attn.explain(t, t, t, { outputDtype: 'float32' })).rejects.toThrow(/^explain returns float32 arrays: outputDtype/);
    await expect(attn.explain(t, t, t, { returnLogSumExp: true })).rejects.toThrow(/^explain returns the stages .*: returnLogSumExp is for/);
    await expect(attn.explain(t, t, t, { returnScores: 'softcapped', softcap: 2 })).rejects.toThrow(/^explain returns the stages .*: returnScores is for/);
    // What they do honour: referenceAttention's float64 log-sum-exp, null `out`.
    const { logSumExp } = attn.referenceAttention(t, t, t, { returnLogSumExp: true, isCausal: { offset: -1 }, out: null });
    expect(logSumExp!.shape).toEqual([2]);
    expect(logSumExp!.data).toBeInstanceOf(Float64Array);
    expect(logSumExp!.data[0]).toBe(-Infinity);
    expect(logSumExp!.data[1]).toBeCloseTo((3 * 1 + 4 * 2) * Math.fround(Math.SQRT1_2), 12); // row 1 sees key 0 only; the scale is float32
    attn.dispose();
  });
});
