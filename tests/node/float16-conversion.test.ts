// The package's float16 conversions (toFloat16/fromFloat16): every half both ways, and float32
// rounding against a brute-force nearest half. (The core's own conversion: tests/cpp/float16_test.cpp,
// and support/float16-suite.ts through a call.)
import { expect, it } from 'vitest';
import { fromFloat16, toFloat16 } from 'sdpa-web';
import { halfValue } from './support/float16-suite.js';
import { rng } from './support/tensors.js';

it('toFloat16/fromFloat16 convert every half exactly both ways and round floats to the nearest even half', () => {
  const every = Uint16Array.from({ length: 65536 }, (_, h) => h);
  const widened = fromFloat16(every);
  const wrongWidened: string[] = [];
  for (let h = 0; h < 65536; h++) {
    const want = halfValue(h);
    if (Number.isNaN(want) ? !Number.isNaN(widened[h]!) : !Object.is(widened[h], want)) wrongWidened.push(h.toString(16));
  }
  expect(wrongWidened).toEqual([]);
  expect(toFloat16(widened)).toEqual(every); // NaN payloads included
  // Rounding: the nearer neighbour, ties to the even one, past 65504 + half an ulp Infinity.
  const next = rng(7);
  const values = new Float32Array(200_000).map(() => (next() - 0.5) * 2 ** Math.floor(next() * 44 - 28));
  values.set([65504, 65519.99, 65520, -65520, 2 ** -25, 1.5 * 2 ** -25, 2 ** -24, 1 + 2 ** -11, 1 + 3 * 2 ** -11, Infinity, -0]);
  const rounded = toFloat16(values);
  const wrong: string[] = [];
  for (let i = 0; i < values.length; i++) {
    const x = values[i]!, a = Math.abs(x);
    let want: number;
    if (a >= 65520) want = 0x7c00;
    else {
      let lo = 0, hi = 0x7bff;
      while (lo < hi) { const mid = (lo + hi + 1) >> 1; if (halfValue(mid) <= a) lo = mid; else hi = mid - 1; }
      const below = a - halfValue(lo), above = lo < 0x7bff ? halfValue(lo + 1) - a : Infinity;
      want = below < above ? lo : above < below ? lo + 1 : lo & 1 ? lo + 1 : lo;
    }
    if (x < 0 || Object.is(x, -0)) want |= 0x8000;
    if (rounded[i] !== want) wrong.push(`${x} -> ${rounded[i]} (want ${want})`);
  }
  expect(wrong).toEqual([]);
});
