// The training lab: a tiny attention model (web/examples/train) learns a task whose answer is an
// attention pattern, trained in a worker (with a second worker computing half of each batch when
// that is measured to be faster) by sdpa-web's attention forward and backward. The page shows the loss falling
// and every head's weights on one sequence moving from uniform to the pattern, then lets the
// student type a sequence for the model to answer. Settings and seed live in the URL.
import * as Plot from '@observablehq/plot';
import { getParam, intParam, setParams, type App } from '../lib/app';
import { el, fmt } from '../lib/tensors';
import { LOSS_FLOOR, type LabConfig } from '../../../examples/train/model';
import { COPY_OFFSET, decode, encode, HALF, LENGTH, rightKey, TASK_NAMES, VOCAB, type TaskName } from '../../../examples/train/tasks';
import type { Progress, TrainerReply, TrainerRequest } from '../lib/training-protocol';

/** Steps one press of Train runs (it continues from where the model is). */
const RUN_STEPS = 500;
/** What "learnt" means, as in the Node test: held-out loss within 0.05 of the floor and > 0.9 of a head's weight on the right key. */
const TARGET_LOSS = LOSS_FLOOR + 0.05;
const TARGET_WEIGHT = 0.9;
const RATES = [0.003, 0.01, 0.03, 0.1];
const DEFAULTS = { task: 'copy' as TaskName, heads: 2, layers: 1, learningRate: 0.03, seed: 1 };
/** The loss plot's top (the untrained loss is about ln 8 ≈ 2.08). */
const LOSS_YMAX = 2.2;
const BATCH_COLOR = 'var(--muted)';
const HELD_COLOR = 'var(--accent)';
const FLOOR_COLOR = '#d95f02';
const CELL = 16;

const TASK_LABEL: Record<TaskName, string> = {
  copy: `Copy the token ${COPY_OFFSET} places back`,
  induction: 'Induction: the second half repeats the first',
};

const DEFAULT_SEQUENCE: Record<TaskName, string> = { copy: 'HEADBADCAFEB', induction: 'BEADCHBEADC' };

/** Viridis at weights 0, 0.01, …, 1 (the page's colour for weights), looked up on every update. */
const weightScale = Plot.scale({ color: { type: 'linear', scheme: 'viridis', domain: [0, 1] } });
const WEIGHT_COLORS = Array.from({ length: 101 }, (_, i) => String(weightScale.apply(i / 100)));

/** The configuration in the URL (tlt task, tlh heads, tll layers, tlr learning rate, tls seed); defaults where absent or invalid. */
function configFromUrl(): LabConfig {
  const task = getParam('tlt');
  const rate = Number(getParam('tlr'));
  return {
    task: TASK_NAMES.includes(task as TaskName) ? (task as TaskName) : DEFAULTS.task,
    heads: intParam('tlh', (n) => n >= 1 && n <= 4, DEFAULTS.heads),
    layers: intParam('tll', (n) => n >= 1 && n <= 2, DEFAULTS.layers),
    learningRate: RATES.includes(rate) ? rate : DEFAULTS.learningRate,
    seed: intParam('tls', (n) => n >= 0 && n < 2 ** 32, DEFAULTS.seed),
  };
}

/** An empty curve of the loss plot. */
function lossPath(stroke: string, width: number): SVGPathElement {
  const path = document.createElementNS('http://www.w3.org/2000/svg', 'path');
  for (const [k, v] of Object.entries({ fill: 'none', stroke, 'stroke-width': String(width) })) path.setAttribute(k, v);
  return path;
}

/** Left and top margin of a head's map, for the letters. */
const MAP_PAD = 18;
const MAP_SIZE = MAP_PAD + LENGTH * CELL;
/** The maps' letters, in CSS px (the canvas is never scaled down). */
const MAP_FONT_PX = 12;

/**
 * A LENGTH × LENGTH heatmap of one head's weights on the shown sequence (rows: queries, columns:
 * keys, labelled by their tokens), the right keys ringed. A canvas: repainting it on every update
 * costs no style or layout work, which hundreds of recoloured SVG cells would.
 */
class HeadMap {
  readonly figure: HTMLElement;
  private readonly canvas: HTMLCanvasElement;
  private readonly score: HTMLElement;

  constructor(title: string, name: string) {
    const dpr = Math.max(1, Math.round(window.devicePixelRatio || 1));
    this.canvas = el('canvas', { class: 'tl-map', width: MAP_SIZE * dpr, height: MAP_SIZE * dpr, role: 'img', 'data-font-px': MAP_FONT_PX });
    this.canvas.style.width = this.canvas.style.height = `${MAP_SIZE}px`;
    this.score = el('span', { class: 'tl-score' });
    this.figure = el('figure', { class: 'tl-head', 'data-testid': 'tl-head', 'data-name': name }, el('figcaption', {}, el('span', { text: title }), this.score), this.canvas);
  }

  /** Weights `n × n` of the sequence `tokens` (n ≤ LENGTH), or null for the right pattern; `score` the head's held-out mean weight on the right key. */
  update(tokens: number[], weights: ArrayLike<number> | null, task: TaskName, score: number | null): void {
    const n = tokens.length;
    const ctx = this.canvas.getContext('2d')!;
    const dpr = this.canvas.width / MAP_SIZE;
    const style = getComputedStyle(this.figure);
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, MAP_SIZE, MAP_SIZE);
    ctx.font = `${MAP_FONT_PX}px ui-monospace, monospace`;
    ctx.fillStyle = style.color;
    ctx.textAlign = 'end';
    ctx.textBaseline = 'middle';
    for (let i = 0; i < n; i++) ctx.fillText(VOCAB[tokens[i]!]!, MAP_PAD - 4, MAP_PAD + i * CELL + CELL / 2);
    ctx.textAlign = 'center';
    ctx.textBaseline = 'alphabetic';
    for (let j = 0; j < n; j++) ctx.fillText(VOCAB[tokens[j]!]!, MAP_PAD + j * CELL + CELL / 2, MAP_PAD - 5);
    for (let i = 0; i < n; i++) {
      for (let j = 0; j <= i; j++) {
        const w = weights ? weights[i * n + j]! : j === rightKey(task, i) ? 1 : 0;
        ctx.fillStyle = WEIGHT_COLORS[Math.round(Math.min(1, Math.max(0, w)) * 100)]!;
        ctx.fillRect(MAP_PAD + j * CELL, MAP_PAD + i * CELL, CELL - 1, CELL - 1);
      }
    }
    ctx.strokeStyle = style.getPropertyValue('--focus').trim() || '#ff9f1c';
    ctx.lineWidth = 2;
    for (let i = 0; i < n; i++) {
      const key = rightKey(task, i);
      if (key >= 0) ctx.strokeRect(MAP_PAD + key * CELL - 0.5, MAP_PAD + i * CELL - 0.5, CELL, CELL);
    }
    this.score.textContent = score === null ? '' : `${fmt(score, 2)} on the right key`;
    this.figure.dataset.score = score === null ? '' : String(score);
    this.canvas.setAttribute('aria-label', `${weights ? 'Attention weights' : 'The right pattern'} on ${decode(tokens)}: rows are queries, columns keys${score === null ? '' : `; mean weight on the right key ${fmt(score, 2)}`}`);
  }
}

export function mountTrainingLab(app: App): void {
  const sec = document.getElementById('training')!;
  let config = configFromUrl();
  const cores = navigator.hardwareConcurrency || 1;
  // Data parallelism: a shard worker can compute half of each batch where there is a second core
  // (the trainer measures whether it helps and uses it only then).
  const shardWorkerCount = cores >= 2 ? 1 : 0;

  const taskSelect = el('select', { id: 'tl-task' }, ...TASK_NAMES.map((t) => el('option', { value: t, text: TASK_LABEL[t] })));
  const headsSelect = el('select', { id: 'tl-heads' }, ...[1, 2, 3, 4].map((h) => el('option', { value: String(h), text: String(h) })));
  const layersSelect = el('select', { id: 'tl-layers' }, ...[1, 2].map((l) => el('option', { value: String(l), text: String(l) })));
  const rateSelect = el('select', { id: 'tl-rate' }, ...RATES.map((r) => el('option', { value: String(r), text: String(r) })));
  const seedInput = el('input', { id: 'tl-seed', type: 'number', min: 0, max: 2 ** 32 - 1, step: 1, inputmode: 'numeric' });
  const trainButton = el('button', { type: 'button', id: 'tl-train', class: 'primary', text: 'Train' });
  const stopButton = el('button', { type: 'button', id: 'tl-stop', text: 'Stop', disabled: true });
  const resetButton = el('button', { type: 'button', id: 'tl-reset', text: 'Reset' });
  const status = el('p', { class: 'tl-status', id: 'tl-status', 'aria-live': 'polite', text: 'Starting the trainer worker…' });
  const verdict = el('p', { class: 'tl-verdict', id: 'tl-verdict' });
  const lossBox = el('figure', { class: 'tl-loss', 'data-testid': 'tl-loss' });
  const heads = el('div', { class: 'tl-heads' });
  const taskText = el('p', { class: 'tl-task-text' });
  const sequenceInput = el('input', { id: 'tl-sequence', type: 'text', maxlength: LENGTH + 4, autocomplete: 'off', spellcheck: 'false', 'aria-describedby': 'tl-sequence-help' });
  const sequenceHelp = el('p', { class: 'note', id: 'tl-sequence-help' });
  const sequenceError = el('p', { class: 'error-text', id: 'tl-sequence-error', role: 'alert' });
  const answerBox = el('div', { class: 'table-scroll tl-answer', 'data-testid': 'tl-answer' });
  const engine = el('p', { class: 'note', id: 'tl-engine' });
  const speed = el('p', { class: 'note', id: 'tl-speed' });

  sec.append(
    el('p', { class: 'section-lede', text: 'Attention is learnt. Here a tiny model starts with random weights, so each head spreads its attention evenly, and is trained on a task whose answer is a position in the sequence. Press Train and watch each head’s weights move from uniform to that position.' }),
    taskText,
    el('p', { text: `The model: each token (${VOCAB.length} letters ${VOCAB.split('').join(' ')}) becomes a learnt 16-number embedding joined to a one-hot code of its position (1 … ${LENGTH}); one or two causal attention layers (each position sees itself and the positions before it) with 1–4 heads of size 8; a read-out that turns the last layer’s attention output into a score per letter. The read-out sees only what attention brought, so the answer has to come through the weights. Every step draws 32 fresh random sequences, runs the model forward and backward with sdpa-web (attn.matmul for the projections, attn.scaledDotProductAttentionSync and attn.scaledDotProductAttentionBackward on all heads at once) and moves every weight by Adam. The targets are smoothed (90 % on the answer, the rest spread over the letters): without that, the model can drive its loss to zero by inflating its scores while its attention stays blurred. So the loss settles at ${fmt(LOSS_FLOOR, 3)}, not 0.` }),
    el('div', { class: 'controls tl-controls' },
      el('label', {}, 'Task ', taskSelect),
      el('label', {}, 'Heads ', headsSelect),
      el('label', {}, 'Layers ', layersSelect),
      el('label', {}, 'Learning rate ', rateSelect),
      el('label', {}, 'Seed ', seedInput),
      el('div', { class: 'tl-buttons' }, trainButton, stopButton, resetButton),
    ),
    status,
    verdict,
    lossBox,
    el('h3', { text: 'Each head’s weights on one sequence' }),
    el('p', { class: 'note', text: 'Rows are queries, columns the keys they can see (their letters label them); bright is weight near 1, dark near 0. The ringed cell of each row is the right key. The first map is the pattern a perfect head would have; the score beside each head is its mean weight on the right key over 64 held-out sequences.' }),
    heads,
    el('h3', { text: 'Ask the model' }),
    el('div', { class: 'controls' }, el('label', {}, 'Your sequence ', sequenceInput)),
    sequenceHelp,
    sequenceError,
    answerBox,
    engine,
    speed,
  );

  // ---- Workers ------------------------------------------------------------------------------
  const trainer = new Worker(new URL('../workers/training.ts', import.meta.url), { type: 'module' });
  const ports: MessagePort[] = [];
  for (let i = 0; i < shardWorkerCount; i++) {
    const shard = new Worker(new URL('../workers/training-shard.ts', import.meta.url), { type: 'module' });
    const channel = new MessageChannel();
    shard.postMessage({ port: channel.port2 }, [channel.port2]);
    ports.push(channel.port1);
  }
  const send = (m: TrainerRequest, transfer: Transferable[] = []) => trainer.postMessage(m, transfer);
  // One thread each: the package's threads gain under 10 % on these [16, H, 12, 8] attention calls
  // (measured in Node), and their web workers would take the cores the shard worker uses.
  send({ type: 'init', shardPorts: ports, threads: 1 }, ports);

  // ---- State --------------------------------------------------------------------------------
  let losses: [number, number][] = [];
  let heldOut: [number, number][] = [];
  let training = false;
  let step = 0;
  let maps: HeadMap[] = [];
  let last: Progress | undefined;
  let trainingTo = RUN_STEPS;
  /** The current Train press: a 'stopped' of an earlier one is stale. */
  let run = 0;

  function writeUrl(): void {
    setParams({
      tlt: config.task === DEFAULTS.task ? null : config.task,
      tlh: config.heads === DEFAULTS.heads ? null : String(config.heads),
      tll: config.layers === DEFAULTS.layers ? null : String(config.layers),
      tlr: config.learningRate === DEFAULTS.learningRate ? null : String(config.learningRate),
      tls: config.seed === DEFAULTS.seed ? null : String(config.seed),
    });
  }

  function showControls(): void {
    taskSelect.value = config.task;
    headsSelect.value = String(config.heads);
    layersSelect.value = String(config.layers);
    rateSelect.value = String(config.learningRate);
    seedInput.value = String(config.seed);
  }

  function describeTask(): void {
    taskText.replaceChildren(
      el('strong', { text: `${TASK_LABEL[config.task]}. ` }),
      config.task === 'copy'
        ? `Sequences of ${LENGTH} random letters. At every position from ${COPY_OFFSET + 1} on, the model must output the letter ${COPY_OFFSET} places back. The right pattern: query i puts its weight on key i − ${COPY_OFFSET}, a diagonal line ${COPY_OFFSET} cells left of the main diagonal.`
        : `The first ${HALF} letters are random and the last ${HALF} repeat them. At every position i of the second half except the last, the model must predict the next letter. The current letter’s copy in the first half sits at i − ${HALF}, and the letter that followed it there, at i − ${HALF} + 1, is the answer (an “induction head” finds it by content; with ${LENGTH}-letter sequences the position alone also tells). The right pattern: a diagonal line from query ${HALF + 1} to key 2, ${HALF - 1} cells left of the main diagonal.`,
    );
    sequenceHelp.textContent =
      config.task === 'copy'
        ? `Up to ${LENGTH} letters from ${VOCAB}; the model answers at every position with the letter it thinks stood ${COPY_OFFSET} places back.`
        : `Up to ${LENGTH} letters from ${VOCAB}: type ${HALF} letters, then start repeating them; at each second-half position the model predicts the next letter.`;
  }

  function buildMaps(): void {
    maps = [new HeadMap('Right pattern', 'target')];
    for (let l = 1; l <= config.layers; l++) for (let h = 1; h <= config.heads; h++) maps.push(new HeadMap(`Layer ${l}, head ${h}`, `layer${l}-head${h}`));
    heads.replaceChildren(...maps.map((m) => m.figure), el('figure', { class: 'tl-legend' }, Plot.legend({ color: { type: 'linear', scheme: 'viridis', domain: [0, 1], label: 'weight' } })));
  }

  /**
   * The loss plot: axes, legend and floor drawn by Observable Plot when the step range changes; the
   * two curves are paths in it, redrawn from the plot's own scales on every update (a full redraw
   * costs tens of ms, a path a fraction of one).
   */
  let lossAxes: { domain: number; x: (v: number) => number; y: (v: number) => number; batch: SVGPathElement; held: SVGPathElement } | undefined;
  function drawLossAxes(): void {
    const width = Math.min(640, Math.max(280, sec.clientWidth - 8));
    const domain = Math.max(RUN_STEPS, trainingTo);
    const plot = Plot.plot({
      width,
      height: 220,
      marginLeft: 44,
      style: { background: 'transparent', fontSize: '12px' },
      x: { label: 'step', domain: [0, domain], grid: true },
      y: { label: 'loss (cross-entropy)', domain: [0, LOSS_YMAX], grid: true, clamp: true },
      color: { legend: true, domain: ['training batch', 'held-out', 'floor'], range: [BATCH_COLOR, HELD_COLOR, FLOOR_COLOR] },
      marks: [Plot.ruleY([LOSS_FLOOR], { stroke: FLOOR_COLOR, strokeDasharray: '5,4' })],
    });
    // With a legend, Plot returns a figure: the legend, then the plot's svg.
    const plotSvg = plot instanceof SVGSVGElement ? plot : plot.querySelector(':scope > svg')!;
    const batch = lossPath(BATCH_COLOR, 1);
    const held = lossPath(HELD_COLOR, 2.5);
    plotSvg.append(batch, held);
    const xs = plot.scale('x')!;
    const ys = plot.scale('y')!;
    lossAxes = { domain, x: (v) => xs.apply(v) as number, y: (v) => ys.apply(Math.min(LOSS_YMAX, v)) as number, batch, held };
    lossBox.replaceChildren(el('figcaption', { text: `Loss: each step’s batch, and 64 held-out sequences; dashed: the floor (${fmt(LOSS_FLOOR, 3)})` }), plot);
  }

  function drawLoss(): void {
    if (!lossAxes || lossAxes.domain !== Math.max(RUN_STEPS, trainingTo)) drawLossAxes();
    const { x, y, batch, held } = lossAxes!;
    const path = (points: [number, number][]) => points.map(([s, l], i) => `${i ? 'L' : 'M'}${x(s).toFixed(1)},${y(l).toFixed(1)}`).join('');
    batch.setAttribute('d', path(losses));
    held.setAttribute('d', path(heldOut));
  }

  /** The answer table of the shown sequence: built when the sequence or task changes, then its last two rows updated in place. */
  let answerRows: { key: string; said: HTMLElement[]; sure: HTMLElement[] } | undefined;
  function showAnswer(p: Progress): void {
    const { tokens, answer } = p.shown;
    const key = `${config.task}:${decode(tokens)}`;
    if (answerRows?.key !== key) {
      const cells = () => tokens.map(() => el('td'));
      const said = cells();
      const sure = cells();
      const row = (head: string, tds: HTMLElement[]) => el('tr', {}, el('th', { scope: 'row', text: head }), ...tds);
      answerBox.replaceChildren(
        el('table', { class: 'data tl-answer-table' },
          el('tbody', {},
            row('position', tokens.map((_, i) => el('td', { text: String(i + 1) }))),
            row('letter', tokens.map((t) => el('td', { text: VOCAB[t]! }))),
            row(config.task === 'copy' ? `model: ${COPY_OFFSET} back` : 'model: next', said),
            row('sure', sure),
          )),
      );
      answerRows = { key, said, sure };
    }
    answer.predicted.forEach((t, i) => {
      const k = rightKey(config.task, i);
      const right = k >= 0 && k < tokens.length ? tokens[k]! : -1;
      const cell = answerRows!.said[i]!;
      cell.textContent = `${VOCAB[t]}${right < 0 ? '' : t === right ? ' ✓' : ' ✗'}`;
      cell.className = right < 0 ? '' : t === right ? 'tl-right' : 'tl-wrong';
      answerRows!.sure[i]!.textContent = fmt(answer.confidence[i]!, 2);
    });
    answerBox.dataset.predicted = decode(answer.predicted);
    answerBox.dataset.tokens = decode(tokens);
  }

  function onProgress(p: Progress): void {
    last = p;
    step = p.step;
    losses = p.step === 0 ? [] : losses.concat(p.losses);
    if (p.step === 0) heldOut = [];
    if (!heldOut.length || heldOut[heldOut.length - 1]![0] !== p.step) heldOut.push([p.step, p.evaluation.loss]);
    const flat = p.evaluation.pattern.flatMap((heads, l) => heads.map((w, h) => ({ w, l, h })));
    const best = flat.reduce((a, b) => (b.w > a.w ? b : a));
    status.textContent = `Step ${p.step}${training ? ` (training to ${trainingTo})` : ''} · held-out loss ${fmt(p.evaluation.loss, 3)} · best head: layer ${best.l + 1}, head ${best.h + 1}, ${fmt(best.w, 2)} of its weight on the right key${p.stepsPerSecond ? ` · ${Math.round(p.stepsPerSecond)} steps/s on ${p.workers} worker${p.workers > 1 ? 's' : ''}` : ''}`;
    status.dataset.workers = String(p.workers);
    if (p.measured.alone && p.measured.shared) speed.textContent = `Measured: ${Math.round(p.measured.alone)} steps/s with the trainer alone, ${Math.round(p.measured.shared)} with a second worker computing half of each batch; training uses the faster (re-measured every 3 s or so).`;
    status.dataset.step = String(p.step);
    status.dataset.loss = String(p.evaluation.loss);
    status.dataset.pattern = String(best.w);
    const learnt = p.evaluation.loss < TARGET_LOSS && best.w > TARGET_WEIGHT;
    verdict.textContent = learnt
      ? `Learnt: the held-out loss is under ${fmt(TARGET_LOSS, 3)} and layer ${best.l + 1}, head ${best.h + 1} puts ${fmt(best.w, 2)} of its weight on the right key.`
      : p.step === 0
        ? 'Untrained: every head spreads its weight over the keys it can see.'
        : '';
    verdict.dataset.learnt = String(learnt);
    maps[0]!.update(p.shown.tokens, null, config.task, null);
    p.shown.answer.weights.forEach((layer, l) => layer.forEach((w, h) => maps[1 + l * config.heads + h]?.update(p.shown.tokens, w, config.task, p.evaluation.pattern[l]![h]!)));
    showAnswer(p);
    drawLoss();
  }

  function setTraining(on: boolean): void {
    training = on;
    trainButton.disabled = on;
    stopButton.disabled = !on;
    sec.dataset.training = String(on);
  }

  function reset(): void {
    setTraining(false);
    send({ type: 'stop' });
    writeUrl();
    describeTask();
    buildMaps();
    losses = [];
    heldOut = [];
    send({ type: 'configure', config });
    showSequence();
  }

  function showSequence(): void {
    let tokens: number[];
    try {
      tokens = encode(sequenceInput.value);
    } catch (e) {
      sequenceError.textContent = e instanceof Error ? e.message : String(e);
      sequenceInput.setAttribute('aria-invalid', 'true');
      return;
    }
    sequenceError.textContent = '';
    sequenceInput.removeAttribute('aria-invalid');
    setParams({ tlq: decode(tokens) === DEFAULT_SEQUENCE[config.task] ? null : decode(tokens) });
    send({ type: 'show', tokens });
  }

  trainer.onmessage = (e: MessageEvent<TrainerReply>) => {
    const m = e.data;
    if (m.type === 'ready') {
      engine.textContent = `Training runs in a web worker on sdpa-web’s ${m.backend} backend (${m.threads} thread)${m.shardWorkers ? `, and a second worker that can compute half of each batch (this device reports ${cores} cores)` : ` alone (this device reports ${cores} core${cores === 1 ? '' : 's'})`}; the page itself only draws.`;
      sec.dataset.ready = 'true';
    } else if (m.type === 'progress') {
      onProgress(m);
    } else if (m.type === 'stopped') {
      if (m.run !== run) return;
      setTraining(false);
      if (last) onProgress(last);
      drawLoss();
    } else {
      setTraining(false);
      status.textContent = `The trainer failed: ${m.message}`;
      app.error('training lab', new Error(m.message));
    }
  };
  trainer.onerror = (e) => app.error('training lab worker', new Error(e.message || 'the worker failed to start'));

  trainButton.addEventListener('click', () => {
    trainingTo = step + RUN_STEPS;
    setTraining(true);
    send({ type: 'train', untilStep: trainingTo, run: ++run });
  });
  stopButton.addEventListener('click', () => send({ type: 'stop' }));
  resetButton.addEventListener('click', reset);
  const change = () => {
    const seed = Number(seedInput.value);
    if (!(seedInput.value.trim() !== '' && Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32)) {
      seedInput.setAttribute('aria-invalid', 'true');
      status.textContent = `Seed must be a whole number from 0 to ${2 ** 32 - 1}; got “${seedInput.value}”.`;
      return;
    }
    seedInput.removeAttribute('aria-invalid');
    if (taskSelect.value !== config.task) sequenceInput.value = DEFAULT_SEQUENCE[taskSelect.value as TaskName];
    config = { task: taskSelect.value as TaskName, heads: Number(headsSelect.value), layers: Number(layersSelect.value), learningRate: Number(rateSelect.value), seed };
    reset();
  };
  for (const c of [taskSelect, headsSelect, layersSelect, rateSelect, seedInput]) c.addEventListener('change', change);
  sequenceInput.addEventListener('input', showSequence);

  showControls();
  sequenceInput.value = getParam('tlq') ?? DEFAULT_SEQUENCE[config.task];
  reset();
  drawLoss();
}
