// The introduction's picture: the attention weights of “dog bites man”, the softmax of the text's scores
// computed by sdpa-web, each row a word's distribution over the words it attends to.
import { getExample } from '../../../examples/worked-examples';
import type { App } from '../lib/app';
import { heatmap } from '../lib/plots';
import { el, fmt, rowsOf, toTensor } from '../lib/tensors';

export function mountIntro(app: App): void {
  const fig = document.getElementById('intro-figure')!;
  const ex = getExample('ex-dog-bites-man');
  const words = ex.tokens!.queries;
  const weights = app.attn.softmax(toTensor(ex.inputs.scores!, app.attn));
  const rows = rowsOf(weights);
  const map = heatmap({ name: 'weights', tensor: weights, rowLabels: words, colLabels: words, rowAxis: 'word', colAxis: 'attends to', kind: 'weights' }, { decimals: 2, cell: 64 });
  map.querySelector('figcaption')?.remove();
  const top = (i: number) => rows[i].indexOf(Math.max(...rows[i]));
  fig.replaceChildren(
    map,
    el('figcaption', {},
      el('strong', { text: '“dog bites man”: ' }),
      `each row is one word’s attention, and adds up to 1. “${words[2]}” looks mostly at itself (${fmt(rows[2][top(2)], 2)}); “${words[1]}” spreads its attention over “${words[0]}” and itself. `,
      el('span', { class: 'note', text: 'Scores from the text’s example; softmax by sdpa-web.' }),
    ),
  );
  fig.dataset.ready = 'true';
}
