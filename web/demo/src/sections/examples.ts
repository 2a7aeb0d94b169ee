// Sections 1, 2 and 7: the formula with a stepper, the worked examples with the texts' printed numbers
// beside the computed ones, and the PyTorch snippet of the current example.
import { workedExamples, getExample, type MatrixInput, type UniformSource, type WorkedExample } from '../../../examples/worked-examples';
import type { PlaygroundLoad } from './playground';
import { currentExample, getParam, setParams, type App } from '../lib/app';
import { runExample, type Comparison, type ExampleRun, type ScoreStatsRunner, type Stage } from '../lib/compute';
import { heavy } from '../lib/heavy';
import { fitMath, tex } from '../lib/katex';
import { heatmap, matrixTable, renderExtra } from '../lib/plots';
import { el, entropy, fmt, isFullyMasked, maxOf, nextFrame, rowsOf, toTensor, type NumTensor } from '../lib/tensors';

/** Which stepper stage shows each printed target. */
const STAGE_OF: Partial<Record<string, Stage['id']>> = { Q: 'projections', K: 'projections', V: 'projections', scores: 'scores', scaledScores: 'scaled', weights: 'weights', maxWeight: 'weights', entropy: 'weights', output: 'output' };

export const DEFAULT_EXAMPLE = 'ex-abc-geometry';

function sourceLine(ex: WorkedExample): HTMLElement {
  return el('p', { class: 'source' }, 'Source: ', el('cite', { text: ex.source.text }), ` — ${ex.source.section}`);
}

export function mountExamples(app: App): { rerun(): void } {
  const examples = document.getElementById('examples')!;
  const pytorch = document.getElementById('pytorch')!;

  // ── Section 1: the stepper (the formula above it is part of the first view) ──
  const select = el('select', { id: 'example-select', 'aria-label': 'Worked example' });
  const bySeed = new Map<string, WorkedExample[]>();
  for (const ex of workedExamples) bySeed.set(ex.source.seed, [...(bySeed.get(ex.source.seed) ?? []), ex]);
  for (const [seed, list] of bySeed) {
    const g = el('optgroup', { label: list[0].source.text.split(' (')[0] });
    for (const ex of list) g.append(el('option', { value: ex.id, text: `${ex.title}${ex.origin === 'constructed' ? ' (constructed)' : ''}` }));
    select.append(g);
  }
  const variantSelect = el('select', { id: 'variant-select', 'aria-label': 'Mask variant', hidden: true });
  const stepNav = el('div', { class: 'steps', role: 'tablist', 'aria-label': 'Stages' });
  const prev = el('button', { type: 'button', class: 'nav-btn', text: '← Previous', 'aria-label': 'Previous stage' });
  const next = el('button', { type: 'button', class: 'nav-btn', text: 'Next →', 'aria-label': 'Next stage' });
  const stagePanel = el('div', { class: 'stage', role: 'tabpanel', id: 'stage-panel', 'aria-live': 'polite' });
  const stepperHead = el('div', { class: 'stepper-head' }, el('label', { for: 'example-select', text: 'Worked example ' }), select, variantSelect);
  const stepperSource = el('div', { class: 'stepper-source' });
  // The stage tabs with Previous/Next stay in view (sticky) while the stage below them is read.
  document.getElementById('stepper-slot')!.replaceWith(el('div', { class: 'stepper', id: 'stepper' }, stepperHead, stepperSource, el('div', { class: 'steps-row' }, prev, stepNav, next), stagePanel));

  // ── Section 2: catalogue and comparisons ──
  const catalogue = el('div', { class: 'catalogue', role: 'list', 'aria-label': 'All worked examples' });
  const detail = el('div', { class: 'example-detail', id: 'example-detail', 'aria-live': 'polite' });
  examples.append(
    el('p', { text: 'Every example in the five source texts, run through sdpa-web. Where a text prints a number, it stands beside the computed one; a ⚠ marks a printed value that differs from the computation by more than the text’s own rounding (the texts contain real slips and illustrative numbers). Examples whose inputs the texts do not give are marked constructed.' }),
    catalogue,
    detail,
  );
  const badges = new Map<string, HTMLElement>();
  for (const ex of workedExamples) {
    const badge = el('span', { class: 'badge', text: ex.printed.length ? '…' : 'no printed numbers' });
    badges.set(ex.id, badge);
    const b = el('button', { type: 'button', class: 'example-card', 'data-example': ex.id, role: 'listitem' }, el('strong', { text: ex.title }), el('span', { class: 'card-source', title: ex.source.text, text: `${ex.source.text.split(' (')[0]}${ex.origin === 'constructed' ? ' · constructed' : ''}` }), badge);
    b.addEventListener('click', () => {
      currentExample.set(ex.id);
      document.getElementById('stepper')!.scrollIntoView({ behavior: 'smooth', block: 'start' });
    });
    catalogue.append(b);
  }

  // ── Section 7: PyTorch snippet ──
  const code = el('code', { class: 'language-python' });
  const copyBtn = el('button', { type: 'button', id: 'copy-pytorch', text: 'Copy snippet' });
  const copyStatus = el('span', { role: 'status', class: 'copy-status' });
  const pyTitle = el('p', {});
  pytorch.append(pyTitle, el('div', { class: 'row' }, copyBtn, copyStatus), el('pre', { class: 'snippet' }, code));
  copyBtn.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(code.textContent ?? '');
      copyStatus.textContent = 'Copied.';
    } catch {
      const r = document.createRange();
      r.selectNodeContents(code);
      getSelection()?.removeAllRanges();
      getSelection()?.addRange(r);
      copyStatus.textContent = 'Clipboard not available: the snippet is selected, press Ctrl+C.';
    }
  });

  let run: ExampleRun | undefined;
  let stageIndex = 0;
  let token = 0;

  /** Show stage i; `write` puts a reader's step into the URL (the first stage is the default: no parameter). */
  function showStage(i: number, focus = false, write = true): void {
    if (!run) return;
    stageIndex = Math.max(0, Math.min(run.stages.length - 1, i));
    if (write) setParams({ step: stageIndex === 0 ? null : String(stageIndex) });
    [...stepNav.children].forEach((b, j) => {
      b.setAttribute('aria-selected', String(j === stageIndex));
      b.setAttribute('tabindex', j === stageIndex ? '0' : '-1');
    });
    if (focus) (stepNav.children[stageIndex] as HTMLElement).focus();
    prev.disabled = stageIndex === 0;
    next.disabled = stageIndex === run.stages.length - 1;
    stagePanel.replaceChildren(renderStage(run.stages[stageIndex]));
    stagePanel.dataset.shown = `${run.example.id}:${stageIndex}`;
  }

  function renderStage(s: Stage): HTMLElement {
    const box = el('div', { 'data-stage': s.id });
    const math = tex(s.tex, true);
    box.append(el('h3', { text: s.title }), math);
    fitMath(math);
    if (s.note) box.append(el('p', { class: 'note', text: s.note }));
    const grid = el('div', { class: 'views', 'data-count': String(s.views.length) });
    for (const v of s.views) {
      // The exact numbers are open beside the heatmap on a wide screen, one tap away on a phone.
      const card = el('div', { class: 'view' }, heatmap(v), el('details', { class: 'numbers', open: innerWidth >= 600 }, el('summary', { text: `Numbers of ${v.name}` }), matrixTable(v)));
      if (v.kind === 'weights' && v.tensor.shape.length === 2) card.append(rowStatsTable(v.tensor, v.rowLabels));
      grid.append(card);
    }
    box.append(grid);
    // The text's printed numbers for this stage, beside the computed ones.
    const here = run?.comparisons.filter((c) => STAGE_OF[c.printed.target] === s.id) ?? [];
    if (here.length) box.append(el('h4', { text: 'What the text prints for this step' }), comparisonTable(here));
    return box;
  }

  async function load(id: string): Promise<void> {
    const ex = getExample(id);
    const my = ++token;
    select.value = id;
    [...catalogue.children].forEach((c) => c.setAttribute('aria-current', String((c as HTMLElement).dataset.example === id)));
    variantSelect.hidden = !ex.inputs.maskVariants;
    // The mask variant in the URL applies to the example the page opened with.
    const wanted = restoreVariant;
    restoreVariant = undefined;
    if (ex.inputs.maskVariants) {
      const keep = variantSelect.dataset.for === id ? variantSelect.value : (wanted ?? '0');
      variantSelect.replaceChildren(...ex.inputs.maskVariants.map((v, i) => el('option', { value: String(i), text: `mask: ${v.label}` })));
      variantSelect.value = keep;
      if (variantSelect.selectedIndex < 0) variantSelect.value = '0';
      variantSelect.dataset.for = id;
    }
    setParams({ var: ex.inputs.maskVariants && variantSelect.value !== '0' ? variantSelect.value : null });
    stagePanel.replaceChildren(el('p', { class: 'progress-text', text: `Computing ${ex.id} with sdpa-web…` }));
    try {
      const progressText = stagePanel.querySelector('.progress-text');
      const between = async (done: number) => {
        if (progressText) progressText.textContent = `Computing ${ex.id} with sdpa-web… ${Math.round(100 * done)}%`;
        await nextFrame();
      };
      // The statistical runs (up to a million scores) go to the worker; the page shows their progress.
      const scoreStats: ScoreStatsRunner = (args, progress) => heavy('scoreStats', { backend: app.attn.backend, ...args }, progress);
      const r = await runExample(app.attn, ex, { maskVariant: Number(variantSelect.value || 0), between, scoreStats });
      if (my !== token) return;
      run = r;
      // The summary leads; how a constructed example was built is one click away, not between the reader and the stage.
      stepperSource.replaceChildren(el('p', { class: 'summary', text: ex.summary }), sourceLine(ex), ex.constructionNote ? el('details', { class: 'constructed' }, el('summary', { text: 'Constructed example: how' }), el('p', { text: ex.constructionNote })) : '');
      stepNav.replaceChildren(
        ...r.stages.map((s, i) => {
          // The formula's five steps keep their overview numbers; the inputs before them are unnumbered.
          const n = OVERVIEW_STEP[s.id];
          const b = el('button', { type: 'button', role: 'tab', 'aria-controls': 'stage-panel', 'data-stage': s.id, 'aria-label': n ? `Step ${n}: ${s.title}` : s.title }, el('span', { class: 'step-n', text: n ? String(n) : '' }), hideFromReaders(tex(s.tab ?? s.tex.split(',')[0].split('\\quad')[0])));
          b.addEventListener('click', () => showStage(i));
          return b;
        }),
      );
      // The step in the URL applies to the example the page opened with; a later example starts at step 1.
      const want = restoreStep;
      restoreStep = undefined;
      if (r.stages.length) {
        if (want !== undefined) showStage(Number.isInteger(want) && want >= 0 && want < r.stages.length ? want : 0, false, false);
        else showStage(0);
      }
      else {
        prev.disabled = next.disabled = true;
        stagePanel.replaceChildren(el('p', { class: 'note' }, 'This example is not one attention call to step through: its results (tables and plots) are in ', el('a', { href: '#example-detail', text: 'Worked examples' }), ' below.'));
        stagePanel.dataset.shown = `${id}:none`;
      }
      renderDetail(r);
      code.textContent = r.pytorch;
      pyTitle.replaceChildren('Current example: ', el('strong', { text: ex.title }), ` (${ex.id}). Paste into Python with PyTorch (≥ 2.1; the FlexAttention form, where the call has one, ≥ 2.5) to check the numbers above: it prints the same stages and compares them with PyTorch’s own kernels.`);
      stagePanel.dataset.ready = id;
    } catch (e) {
      app.error(`example ${id}`, e);
    }
  }

  function renderDetail(r: ExampleRun): void {
    const ex = r.example;
    const out = el('div', { 'data-example': ex.id });
    out.append(el('h3', { text: `${ex.title}` }), sourceLine(ex), el('p', { text: ex.summary }));
    if (ex.constructionNote) out.append(el('p', { class: 'constructed', text: `Constructed: ${ex.constructionNote}` }));
    if (ex.compute === 'attention' || ex.compute === 'projection-attention') {
      const b = el('button', { type: 'button', id: 'open-in-playground', text: 'Edit this example in the playground' });
      b.addEventListener('click', async () => {
        await app.open('playground');
        document.dispatchEvent(new CustomEvent('sdpa:playground-load', { detail: playgroundLoad(ex, Number(variantSelect.value || 0), app.attn) }));
      });
      out.append(el('p', {}, b));
    }
    if (r.comparisons.length) out.append(comparisonTable(r.comparisons));
    else out.append(el('p', { class: 'note', text: 'The text prints no numbers for this example: the stepper above shows every computed step.' }));
    if (ex.claims?.length) out.append(el('div', { class: 'claims' }, el('h4', { text: 'What the text says' }), el('ul', {}, ...ex.claims.map((c) => el('li', { text: c })))));
    for (const x of r.extras) out.append(renderExtra(x));
    for (const n of r.notes) out.append(el('p', { class: 'note', text: n }));
    out.append(el('p', { class: 'note', text: `Computed by sdpa-web (instance backend ${r.backend}); the step-by-step stages come from its explain, which runs the float32 scalar reference on any backend.` }));
    detail.replaceChildren(out);
    updateBadge(ex.id, r.comparisons);
  }

  function updateBadge(id: string, comps: Comparison[]): void {
    const b = badges.get(id)!;
    if (!comps.length) return;
    const slips = comps.filter((c) => c.status === 'slip').length;
    b.textContent = slips ? `⚠ ${slips} of ${comps.length} printed differ` : `✓ ${comps.length} printed agree`;
    b.className = `badge ${slips ? 'slip' : 'ok'}`;
  }

  select.addEventListener('change', () => currentExample.set(select.value));
  variantSelect.addEventListener('change', () => {
    setParams({ var: variantSelect.value === '0' ? null : variantSelect.value });
    void load(currentExample.id);
  });
  prev.addEventListener('click', () => showStage(stageIndex - 1));
  next.addEventListener('click', () => showStage(stageIndex + 1));
  stepNav.addEventListener('keydown', (e) => {
    if (e.key === 'ArrowRight') showStage(stageIndex + 1, true);
    else if (e.key === 'ArrowLeft') showStage(stageIndex - 1, true);
    else if (e.key === 'Home') showStage(0, true);
    else if (e.key === 'End') showStage(run ? run.stages.length - 1 : 0, true);
    else return;
    e.preventDefault();
  });
  currentExample.onChange((id) => void load(id));

  const start = getParam('ex');
  // A gentle default: three tokens with Q, K, V given, every stage of the formula, no slips.
  const first = start && workedExamples.some((e) => e.id === start) ? start : DEFAULT_EXAMPLE;
  let restoreStep: number | undefined = Number(getParam('step') ?? 0);
  let restoreVariant: string | undefined = getParam('var') ?? undefined;
  currentExample.init(first);
  void load(first).then(() => void badgeAll());

  // Fill every catalogue badge (cheap examples only; the statistics ones run when opened).
  async function badgeAll(): Promise<void> {
    for (const ex of workedExamples) {
      if (!ex.printed.length || ex.compute === 'score-stats') continue;
      try {
        const r = await runExample(app.attn, ex);
        updateBadge(ex.id, r.comparisons);
      } catch (e) {
        app.error(`example ${ex.id}`, e);
      }
    }
    for (const ex of workedExamples) if (ex.compute === 'score-stats') badges.get(ex.id)!.textContent = 'statistical: open to run';
    catalogue.dataset.ready = 'true';
  }

  return { rerun: () => void load(currentExample.id) };
}

/** Each stage's number among the formula's five steps (the overview's numbering); input stages have none. */
const OVERVIEW_STEP: Partial<Record<Stage['id'], number>> = { scores: 1, scaled: 2, masked: 3, weights: 4, temperature: 4, output: 5 };

function playgroundLoad(ex: WorkedExample, variant: number, source: UniformSource): PlaygroundLoad {
  const i = ex.inputs;
  const t = (m: MatrixInput) => toTensor(m, source);
  const mask = i.maskVariants?.[variant]?.mask ?? i.mask;
  return {
    mode: i.x ? 'x' : 'qkv',
    matrices: i.x ? { x: t(i.x), wq: t(i.wq!), wk: t(i.wk!), wv: t(i.wv!) } : { q: t(i.q!), k: t(i.k!), v: t(i.v!) },
    queryTokens: ex.tokens?.queries ?? [],
    keyTokens: ex.tokens?.keys ?? [],
    mask: !mask ? 'none' : mask.kind === 'causal' ? (mask.align === 'top-left' ? 'causal-tl' : 'causal-br') : mask.kind === 'padding' ? 'padding' : 'none',
    validKeys: mask?.kind === 'padding' ? mask.validKeys : undefined,
  };
}

/** The tab's label says it in words (aria-label): its typeset formula is for the eye only. */
function hideFromReaders<T extends HTMLElement>(e: T): T {
  e.setAttribute('aria-hidden', 'true');
  return e;
}

function rowStatsTable(w: NumTensor, labels: string[]): HTMLElement {
  const table = el('table', { class: 'data row-stats' });
  table.append(el('thead', {}, el('tr', {}, el('th', { scope: 'col', text: 'row' }), el('th', { scope: 'col', text: 'sum' }), el('th', { scope: 'col', text: 'max weight' }), el('th', { scope: 'col', text: 'entropy (nats)' }))));
  const body = el('tbody');
  rowsOf(w).forEach((r, i) => {
    const masked = isFullyMasked(r);
    body.append(el('tr', masked ? { class: 'fully-masked' } : {}, el('th', { scope: 'row', text: labels[i] ?? String(i + 1) }), el('td', { text: masked ? 'fully masked (all 0)' : fmt(r.reduce((a, b) => a + b, 0), 4) }), el('td', { text: masked ? '—' : fmt(maxOf(r), 3) }), el('td', { text: masked ? '—' : fmt(entropy(r), 3) })));
  });
  table.append(body);
  return el('details', { class: 'numbers' }, el('summary', { text: 'Row statistics: sum, max weight, entropy' }), table);
}

function comparisonTable(comps: Comparison[]): HTMLElement {
  const table = el('table', { class: 'data compare', 'data-testid': 'comparisons' });
  table.append(el('thead', {}, el('tr', {}, ...['printed quantity', 'text prints', 'sdpa-web computes', 'verdict'].map((c) => el('th', { scope: 'col', text: c })))));
  const body = el('tbody');
  for (const c of comps) {
    const p = c.printed;
    const dec = (i: number) => (Array.isArray(p.decimals) ? p.decimals[i] : p.decimals);
    const printedRows = el('div', { class: 'pv-rows' });
    const computedRows = el('div', { class: 'pv-rows' });
    let pr: HTMLElement | undefined, cr: HTMLElement | undefined;
    p.values.forEach((v, i) => {
      if (i % c.cols === 0) {
        pr = printedRows.appendChild(el('div', { class: 'pv-row' }));
        cr = computedRows.appendChild(el('div', { class: 'pv-row' }));
      }
      const cls = c.agrees[i] ? 'v' : 'v differs';
      pr!.append(el('span', { class: cls, 'data-printed': String(v), text: v.toFixed(dec(i)) }), ' ');
      cr!.append(el('span', { class: cls, 'data-computed': String(c.computed[i]), title: String(c.computed[i]), text: fmt(c.computed[i], Math.max(dec(i), 1) + 1) }), ' ');
    });
    const printed = el('td', { class: 'printed', 'data-label': 'text prints' }, printedRows);
    const computed = el('td', { class: 'computed', 'data-label': 'sdpa-web computes' }, computedRows);
    const relation = p.relation === 'statistical' ? ` (statistical, ± ${p.tolerance})` : p.relation === 'at-least' ? ' (claim: at least)' : ` (printed to ${Array.isArray(p.decimals) ? p.decimals.join('/') : p.decimals} decimals)`;
    const verdict = el('td', { class: `verdict ${c.status}`, 'data-label': 'verdict' }, el('strong', { text: c.status === 'ok' ? '✓ agrees' : '⚠ slip: differs beyond the printed rounding' }));
    if (c.why) verdict.append(el('p', { class: 'why', text: c.why }));
    if (p.note) verdict.append(el('p', { class: 'pnote', text: `Text: ${p.note}` }));
    body.append(el('tr', { class: c.status, 'data-status': c.status, 'data-target': p.target }, el('th', { scope: 'row' }, p.label, el('small', { text: relation })), printed, computed, verdict));
  }
  table.append(body);
  return el('div', { class: 'table-scroll' }, table);
}
