// Gradient view: how the loss's gradient flows back through one query's softmax. For a chosen row i,
// the library's float64 weights a give the softmax Jacobian J = diag(a) − aaᵀ; J turns ∂L/∂A_i into
// ∂L/∂S_i, and ·K/√d_k into ∂L/∂Q_i, which is exactly the library's own gradient. Then every
// gradient of the library (float32 backward and float64 reference) beside float64 finite differences.
import { getParam, setParams, type App } from '../lib/app';
import { gradientView } from '../lib/explainers';
import { fitMath, tex } from '../lib/katex';
import { heatmap, matrixTable } from '../lib/plots';
import { el, fmt, seqLabels } from '../lib/tensors';

export function mountGradients(app: App): void {
  const sec = document.getElementById('gradients')!;
  const rows = 3;
  const rowSel = el('select', { id: 'grad-row' }, ...Array.from({ length: rows }, (_, i) => el('option', { value: String(i), text: `query q${i + 1}` })));
  const want = Number(getParam('grow') ?? 1) - 1;
  rowSel.value = String(Number.isInteger(want) && want >= 0 && want < rows ? want : 0);
  const out = el('div', { id: 'grad-out' });
  sec.append(
    el('p', { text: 'Seeded Q [3 × 4], K [5 × 4], V [5 × 3] and an upstream gradient ∂L/∂O [3 × 3] (the loss L = Σ O ⊙ ∂L/∂O). The softmax couples a row’s weights: nudging one score moves every weight of the row, as its Jacobian says.' }),
    fitMath(tex('\\begin{gathered} J_{jl} = \\frac{\\partial a_j}{\\partial s_l} = a_j(\\delta_{jl} - a_l), \\\\ \\frac{\\partial L}{\\partial S_i} = J\\,\\frac{\\partial L}{\\partial A_i}, \\qquad \\frac{\\partial L}{\\partial Q_i} = \\frac{\\partial L}{\\partial S_i}\\,\\frac{K}{\\sqrt{d_k}} \\end{gathered}', true)),
    el('div', { class: 'controls' }, el('label', {}, 'Row', rowSel)),
    out,
  );

  async function draw(): Promise<void> {
    try {
      const i = Number(rowSel.value);
      setParams({ grow: i === 0 ? null : String(i + 1) });
      const g = await gradientView(app.attn, i);
      const keys = seqLabels('k', g.weights.length);
      const vec = (name: string, data: number[], cols: string[], kind: 'weights' | 'signed' = 'signed') => ({ name, tensor: { data, shape: [1, data.length] }, rowLabels: [`q${i + 1}`], colLabels: cols, rowAxis: 'query', colAxis: 'key', kind });
      const e = g.dQrowChain.length;
      const dQ32 = Array.from(g.library.dQuery.data).slice(i * e, (i + 1) * e);
      const dQ64 = Array.from(g.reference64.dQuery.data).slice(i * e, (i + 1) * e);
      // One row per column of ∂L/∂Q (narrow enough for a phone); the columns are the three ways to it.
      const columns: [string, string, number[]][] = [
        ['J·∂L/∂A_i·K/√d_k', 'this page’s chain, float64', g.dQrowChain],
        ['float64 backward', 'sdpa-web referenceAttentionBackward', dQ64],
        ['float32 backward', 'sdpa-web scaledDotProductAttentionBackward', dQ32],
      ];
      const chainTable = el('table', { class: 'data', id: 'grad-chain' },
        el('caption', { text: `∂L/∂Q of row q${i + 1}, column by column: the page’s chain, the library’s float64 reference backward and its float32 backward` }),
        el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'column' }), ...columns.map(([h, title]) => el('th', { scope: 'col', title, text: h })))),
        el('tbody', {}, ...seqLabels('d', e).map((d, j) => el('tr', {}, el('th', { scope: 'row', text: d }), ...columns.map(([, , r]) => el('td', { 'data-v': String(r[j]), text: fmt(r[j]!, 6) }))))),
      );
      const gradRows = (['dQuery', 'dKey', 'dValue'] as const).map((name) => {
        const lib = Array.from(g.library[name].data), ref = Array.from(g.reference64[name].data), fd = g.finite[name];
        const diff = (a: number[], b: number[]) => Math.max(...a.map((x, j) => Math.abs(x - b[j])));
        return [name === 'dQuery' ? '∂L/∂Q' : name === 'dKey' ? '∂L/∂K' : '∂L/∂V', lib, ref, fd, diff(ref, fd), diff(lib, ref)] as const;
      });
      out.replaceChildren(
        el('div', { class: 'views' },
          el('div', { class: 'view' }, heatmap(vec(`weights a = A_${i + 1} (float64)`, g.weights, keys, 'weights'), { decimals: 3 })),
          el('div', { class: 'view', id: 'grad-jacobian' }, heatmap({ name: `softmax Jacobian J of row q${i + 1}`, tensor: g.jacobian, rowLabels: keys.map((k) => `∂a(${k})`), colLabels: keys.map((k) => `∂s(${k})`), rowAxis: 'weight', colAxis: 'score', kind: 'signed' }, { decimals: 3 }), el('details', { class: 'numbers' }, el('summary', { text: 'Numbers of J' }), matrixTable({ name: 'J', tensor: g.jacobian, rowLabels: keys, colLabels: keys, rowAxis: 'a', colAxis: 's', kind: 'signed' }, 5)), el('p', { class: 'note', text: 'Each row sums to 0: the weights always add up to 1. The diagonal a_j(1 − a_j) is largest for a weight near ½ and vanishes when the row saturates (a weight near 0 or 1).' })),
          el('div', { class: 'view' }, heatmap(vec('∂L/∂A_i = ∂L/∂O_i · Vᵀ', g.dA, keys), { decimals: 3 }), heatmap(vec('∂L/∂S_i = J · ∂L/∂A_i', g.dS, keys), { decimals: 3 })),
        ),
        el('h3', { text: `∂L/∂Q of row q${i + 1}: the chain ends at the library’s own gradient` }),
        el('div', { class: 'table-scroll' }, chainTable),
        el('h3', { text: 'Every gradient: the library beside float64 finite differences' }),
        el('div', { class: 'table-scroll' }, el('table', { class: 'data', id: 'grad-all' },
          el('thead', {}, el('tr', {}, ...([['gradient', 'gradient'], ['float64 vs finite diff.', 'max |float64 reference backward − float64 finite difference|'], ['float32 vs float64', 'max |float32 backward − float64 reference backward|']] as const).map(([c, title]) => el('th', { scope: 'col', title, text: c })))),
          el('tbody', {}, ...gradRows.map(([n, , , , dFd, d32]) => el('tr', { 'data-grad': n }, el('th', { scope: 'row', text: n }), el('td', { text: dFd.toExponential(1) }), el('td', { text: d32.toExponential(1) })))),
        )),
        ...gradRows.map(([n, lib, ref, fd]) => el('details', { class: 'numbers', 'data-grad': n }, el('summary', { text: `Numbers of ${n}` }), el('div', { class: 'table-scroll' }, el('table', { class: 'data grad-numbers' },
          el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'element' }), ...lib.map((_, j) => el('th', { scope: 'col', text: String(j + 1) })))),
          el('tbody', {}, ...([['sdpa-web float32 backward', lib], ['sdpa-web float64 reference', ref], ['finite difference (float64, h = 2⁻¹⁰)', fd]] as [string, readonly number[]][]).map(([label, xs]) => el('tr', {}, el('th', { scope: 'row', text: label }), ...xs.map((x) => el('td', { 'data-v': String(x), text: fmt(x, 4) }))))),
        )))),
        el('p', { class: 'note', text: 'The finite differences perturb each input by ±2⁻¹⁰ and run the library’s float64 forward pass (referenceAttention); they agree with its float64 backward to about 1e−8, and the float32 backward differs from both by float32 rounding.' }),
      );
      sec.dataset.row = String(i);
    } catch (e) {
      app.error('gradients', e);
    }
  }
  rowSel.addEventListener('change', () => void draw());
  void draw();
}
