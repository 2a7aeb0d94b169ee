// The page's first view, computed when the page is built (in Node, by sdpa-web and KaTeX) and written
// into index.html, so the first view needs neither the WebAssembly nor KaTeX's or Observable Plot's
// JavaScript: the introduction's picture (the softmax of "dog bites man"'s scores, by the library)
// and the formula with its five steps (typeset by KaTeX). Everything else loads when it is scrolled to.
import katex from 'katex';
import * as Plot from '@observablehq/plot';
import { createAttention } from '../../../src/index';
import { getExample } from '../../../examples/worked-examples';
import { FORMULA, OVERVIEW } from '../lib/formula';
import { fmt, rowsOf, toTensor } from '../lib/tensors';

const escape = (s: string) => s.replace(/[&<>"]/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;' })[c]!);
const typeset = (src: string, displayMode: boolean) => katex.renderToString(src, { displayMode, throwOnError: false, output: 'htmlAndMathml' });

/** The weights' colour scale of every heatmap on the page (Observable Plot's viridis on [0, 1]). */
const viridisScale = Plot.scale({ color: { type: 'linear', scheme: 'viridis', domain: [0, 1] } });
const interpolateViridis = (w: number): string => viridisScale.apply(w) as string;

/** Text colour readable on a viridis fill (dark at 0, light at 1). */
const ink = (w: number) => (w > 0.55 ? '#111' : '#fff');

/** The introduction's picture: a table of weights coloured by viridis, with its colour key. */
async function introFigure(): Promise<string> {
  const attn = await createAttention({ backend: 'scalar' });
  try {
    const ex = getExample('ex-dog-bites-man');
    const words = ex.tokens!.queries;
    const rows = rowsOf(attn.softmax(toTensor(ex.inputs.scores!, attn)));
    const top = (i: number) => rows[i].indexOf(Math.max(...rows[i]));
    const head = `<tr><th class="corner" scope="col"><span>word ↓</span> <span>attends to →</span></th>${words.map((w) => `<th scope="col">${escape(w)}</th>`).join('')}</tr>`;
    const body = rows
      .map((r, i) => `<tr><th scope="row">${escape(words[i])}</th>${r.map((v, j) => `<td data-v="${v}" style="background:${interpolateViridis(v)};color:${ink(v)}" title="${escape(words[i])} → ${escape(words[j])}: ${v.toPrecision(7)}">${fmt(v, 2)}</td>`).join('')}</tr>`)
      .join('');
    const stops = Array.from({ length: 11 }, (_, i) => interpolateViridis(i / 10)).join(', ');
    return `<table class="intro-map" data-testid="intro-weights" aria-label="Attention weights of “dog bites man”: rows are the words, columns the words they attend to"><thead>${head}</thead><tbody>${body}</tbody></table>
<div class="intro-key" aria-hidden="true"><span>0</span><span class="ramp" style="background:linear-gradient(to right, ${stops})"></span><span>1</span> weight</div>
<figcaption><strong>“dog bites man”:</strong> each row is one word’s attention, and adds up to 1. “${escape(words[2])}” looks mostly at itself (${fmt(rows[2][top(2)], 2)}); “${escape(words[1])}” spreads its attention over “${escape(words[0])}” and itself. <span class="note">Scores from the text’s example; softmax by sdpa-web (computed when this page was built).</span></figcaption>`;
  } finally {
    attn.dispose();
  }
}

/** The HTML that replaces each `<!--first-view:NAME-->` marker of index.html. */
export async function firstViewHtml(): Promise<Record<string, string>> {
  return {
    intro: await introFigure(),
    formula: typeset(FORMULA, true),
    overview: OVERVIEW.map(([tex, text]) => `<li>${typeset(tex, false)}<span>${escape(text)}</span></li>`).join(''),
  };
}
