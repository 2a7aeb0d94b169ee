import katex from 'katex';

export { fitMath } from './fit';

/** Render TeX into a new element (display or inline). KaTeX's CSS comes with the first view. */
export function tex(src: string, display = false): HTMLElement {
  const span = document.createElement(display ? 'div' : 'span');
  span.className = display ? 'math display' : 'math';
  katex.render(src, span, { displayMode: display, throwOnError: false, output: 'htmlAndMathml' });
  return span;
}
