import katex from 'katex';
import 'katex/dist/katex.min.css';

/** Render TeX into a new element (display or inline). */
export function tex(src: string, display = false): HTMLElement {
  const span = document.createElement(display ? 'div' : 'span');
  span.className = display ? 'math display' : 'math';
  katex.render(src, span, { displayMode: display, throwOnError: false, output: 'htmlAndMathml' });
  return span;
}
