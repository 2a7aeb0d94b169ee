// What the bench prints, kept for the results file; and that file (`--results`): one Markdown
// page per run with the command line, the date (UTC), the machine and build, the notes given
// with --note, and the printed tables as they came out; and the pairs of rows that --baseline
// sets side by side.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { dirname, extname, isAbsolute, join, relative } from 'node:path';

const printed = [];

/** Prints a line of the bench's results (tables, ratios) and keeps it for the results file. */
export function print(text = '') {
  console.log(text);
  printed.push(...String(text).split('\n'));
}

/** `DIR` gives DIR/<mode>.md; a path ending in .md is the file itself. */
export function resultsPath(target, mode) {
  return extname(target) === '.md' ? target : join(target, `${mode}.md`);
}

/** The bench's arguments as one shell command line (--note's text is in the file's notes). */
export function commandLine(argv) {
  const args = [];
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--note') i++;
    else if (!argv[i].startsWith('--note=')) args.push(/^[\w@%+=:,./-]+$/.test(argv[i]) ? argv[i] : `'${argv[i].replaceAll("'", `'\\''`)}'`);
  }
  return ['npm run bench', ...(args.length ? ['--', ...args] : [])].join(' ');
}

/** `2026-11-23T21:40:05.123Z` -> `2026-11-23 21:40 UTC`. */
const utc = (iso) => `${iso.slice(0, 10)} ${iso.slice(11, 16)} UTC`;

/**
 * Writes the results file of a run: `run` = { mode, command, startedAt (ISO), wallSeconds, machine
 * { cpu, cores, node, loadAverage, loadAverageAtEnd, build, gpu? }, notes [string], json (the JSON's path) }, root = the
 * repository (paths in the file are relative to it). Returns the file's path.
 */
export function writeResults(path, run, root) {
  const { machine } = run;
  const lines = [
    `# Bench results: ${run.mode}`,
    '',
    'Written by the bench (`scripts/bench/`); run the command again to replace it. What the mode',
    'measures and how to read it: `npm run bench -- --help` and the design notes in `docs/`.',
    '',
    `- **Command:** \`${run.command}\``,
    `- **Date:** ${utc(run.startedAt)} (${Math.round(run.wallSeconds)} s wall)`,
    `- **Machine:** ${machine.cpu}, ${machine.cores} cores, Node ${machine.node}; load average ${machine.loadAverage.toFixed(2)} at the start, ${machine.loadAverageAtEnd.toFixed(2)} at the end`,
    `- **Build:** ${machine.build}`,
    ...(machine.gpu ? [`- **GPU adapter:** ${machine.gpu}`] : []),
    `- **JSON:** \`${inside(root, run.json)}\` (not kept in the repository)`,
    ...(run.notes.length ? ['', '## Notes', '', ...run.notes.map((n) => `- ${n}`)] : []),
    '',
    '## Output',
    '',
    '```text',
    ...trimBlankEdges(printed),
    '```',
    '',
  ];
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, lines.join('\n'));
  return path;
}

/** `path` relative to `root` when it lies inside it, else as given. */
function inside(root, path) {
  const rel = relative(root, path);
  return rel.startsWith('..') || isAbsolute(rel) ? path : rel;
}

function trimBlankEdges(lines) {
  let [start, end] = [0, lines.length];
  while (start < end && !lines[start].trim()) start++;
  while (end > start && !lines[end - 1].trim()) end--;
  return lines.slice(start, end);
}

/**
 * Each timed GPU-resident row beside its "… @baseline" twin (bench --baseline), as time new/old:
 * [{ row, oneCall, pipelined, gpu }], each ratio undefined where either side lacks that time.
 */
export function baselineRatios(rows) {
  const timed = rows.filter((r) => r.ms !== undefined);
  const ratio = (a, b) => (a > 0 && b > 0 ? a / b : undefined);
  return timed
    .filter((r) => !r.engine.endsWith(' @baseline'))
    .map((mine) => [mine, timed.find((r) => r.part === mine.part && r.case === mine.case && r.engine === `${mine.engine} @baseline`)])
    .filter(([, theirs]) => theirs)
    .map(([mine, theirs]) => ({
      row: mine,
      oneCall: ratio(mine.ms, theirs.ms),
      pipelined: ratio(mine.pipelined?.ms, theirs.pipelined?.ms),
      gpu: ratio(mine.profile?.gpuMs, theirs.profile?.gpuMs),
    }));
}

/** What is wrong with --baseline DIR (another build's dist/), or undefined when it is one. */
export function baselineProblem(dir) {
  return existsSync(join(dir, 'index.js')) ? undefined : `--baseline ${dir}: want another build's dist/ (its index.js is missing)`;
}
