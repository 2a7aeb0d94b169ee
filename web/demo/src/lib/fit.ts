/**
 * Fit display math to its box: when the formula is wider than the box (a phone), scale its font down
 * until it fits, to no less than 55 % (below that it scrolls sideways inside its own line). Refit when
 * the box's width changes or a font arrives (KaTeX's fonts load when first used). Returns the box.
 */
export function fitMath<T extends HTMLElement>(box: T): T {
  let lastWidth = -1;
  const fit = () => {
    // A box taken out of the page (a re-render) stops being observed.
    if (!box.isConnected && lastWidth !== -1) {
      observer.disconnect();
      document.fonts.removeEventListener('loadingdone', refit);
      return;
    }
    const display = box.querySelector<HTMLElement>('.katex-display') ?? box;
    const width = display.clientWidth;
    if (width === lastWidth || width === 0) return;
    lastWidth = width;
    box.style.fontSize = '';
    const base = parseFloat(getComputedStyle(box).fontSize);
    let size = base;
    // The width is not quite proportional to the font size (rounding, struts): a few rounds.
    for (let round = 0; round < 4 && display.scrollWidth > width && size > base * 0.55; round++) {
      size = Math.max(base * 0.55, size * (width / display.scrollWidth) * 0.98);
      box.style.fontSize = `${size.toFixed(2)}px`;
    }
  };
  const refit = () => {
    lastWidth = -1;
    fit();
  };
  const observer = new ResizeObserver(fit);
  observer.observe(box);
  document.fonts.addEventListener('loadingdone', refit);
  return box;
}
