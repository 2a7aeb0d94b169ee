import katex from 'katex';
import 'katex/dist/katex.min.css';

/** Render TeX into a new element (display or inline). */
export function tex(src: string, display = false): HTMLElement {
  const span = document.createElement(display ? 'div' : 'span');
  span.className = display ? 'math display' : 'math';
  katex.render(src, span, { displayMode: display, throwOnError: false, output: 'htmlAndMathml' });
  return span;
}

/**
 * Fit display math to its box: when the formula is wider than the box (a phone), scale its font down
 * until it fits, to no less than 55 % (below that it scrolls sideways inside its own line). Refit when
 * the box's width changes. Returns the box.
 */
export function fitMath<T extends HTMLElement>(box: T): T {
  let lastWidth = -1;
  const fit = () => {
    // A box taken out of the page (a re-render) stops being observed.
    if (!box.isConnected && lastWidth !== -1) return observer.disconnect();
    const display = box.querySelector<HTMLElement>('.katex-display') ?? box;
    const width = display.clientWidth;
    if (width === lastWidth || width === 0) return;
    lastWidth = width;
    box.style.fontSize = '';
    const need = display.scrollWidth;
    if (need <= width) return;
    const base = parseFloat(getComputedStyle(box).fontSize);
    box.style.fontSize = `${(base * Math.max(0.55, (width / need) * 0.97)).toFixed(2)}px`;
  };
  const observer = new ResizeObserver(fit);
  observer.observe(box);
  return box;
}
