// The introduction's picture was computed by sdpa-web when the page was built; once the library has
// loaded in the browser, it computes the same softmax again and the caption says whether they agree.
import { getExample } from '../../../examples/worked-examples';
import type { App } from '../lib/app';
import { toTensor } from '../lib/tensors';

export function checkIntro(app: App): void {
  const fig = document.getElementById('intro-figure')!;
  const cells = [...fig.querySelectorAll<HTMLElement>('td[data-v]')];
  const here = app.attn.softmax(toTensor(getExample('ex-dog-bites-man').inputs.scores!, app.attn)).data;
  const worst = Math.max(...cells.map((c, i) => Math.abs(Number(c.dataset.v) - here[i])));
  const same = cells.length === here.length && worst <= 1e-6;
  fig.dataset.checked = same ? 'same' : 'differs';
  const note = fig.querySelector('.note');
  if (note) note.textContent = same ? 'Scores from the text’s example; softmax by sdpa-web, when this page was built and again in your browser: the same weights.' : `Scores from the text’s example; softmax by sdpa-web when this page was built. Your browser’s sdpa-web differs by up to ${worst.toExponential(1)}.`;
}
