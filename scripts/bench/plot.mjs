// SVG grouped bar chart: GFLOP/s per shape (groups) per engine (bars), with the peak probe as a
// dashed line. Engines that errored on a shape get an "×" mark instead of a bar.

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#17becf', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22'];

const esc = (s) => String(s).replace(/&/g, '&amp;').replace(/</g, '&lt;');

export function svgChart(rows, shapes, engines, labels, peak, title) {
  const W = 1100, H = 520, left = 60, right = 210, top = 40, bottom = 60;
  const plotW = W - left - right, plotH = H - top - bottom;
  const maxY = Math.max(peak || 0, ...rows.map((r) => r.gflops || 0)) * 1.08 || 1;
  const y = (v) => top + plotH - (v / maxY) * plotH;
  const groupW = plotW / shapes.length;
  const barW = (groupW * 0.85) / engines.length;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${left}" y="22" font-size="15">${esc(title)}</text>`);
  const step = maxY > 100 ? 20 : maxY > 40 ? 10 : 5;
  for (let v = 0; v <= maxY; v += step) {
    out.push(`<line x1="${left}" x2="${left + plotW}" y1="${y(v)}" y2="${y(v)}" stroke="#ddd"/>`);
    out.push(`<text x="${left - 6}" y="${y(v) + 4}" text-anchor="end">${v}</text>`);
  }
  out.push(`<text transform="translate(16 ${top + plotH / 2}) rotate(-90)" text-anchor="middle">GFLOP/s (4·BH·N²·D / median time)</text>`);
  if (peak) {
    out.push(`<line x1="${left}" x2="${left + plotW}" y1="${y(peak)}" y2="${y(peak)}" stroke="black" stroke-dasharray="6 4"/>`);
    out.push(`<text x="${left + plotW - 4}" y="${y(peak) - 4}" text-anchor="end">peak probe ${peak.toFixed(1)}</text>`);
  }
  shapes.forEach((shape, g) => {
    const x0 = left + g * groupW + groupW * 0.075;
    engines.forEach((engine, e) => {
      const r = rows.find((row) => row.shape === shape && row.engine === engine);
      const x = x0 + e * barW;
      if (!r) return;
      if (r.error || !r.gflops) {
        out.push(`<text x="${x + barW / 2}" y="${y(0) - 3}" text-anchor="middle" fill="${COLORS[e % COLORS.length]}">×<title>${esc(labels[engine] ?? engine)}: ${esc(r.error ?? 'no result')}</title></text>`);
        return;
      }
      out.push(`<rect x="${x.toFixed(1)}" y="${y(r.gflops).toFixed(1)}" width="${(barW * 0.9).toFixed(1)}" height="${(y(0) - y(r.gflops)).toFixed(1)}" fill="${COLORS[e % COLORS.length]}"><title>${esc(labels[engine] ?? engine)} ${shape}: ${r.gflops.toFixed(1)} GFLOP/s, median ${r.medianMs.toFixed(3)} ms</title></rect>`);
    });
    out.push(`<text x="${left + g * groupW + groupW / 2}" y="${top + plotH + 18}" text-anchor="middle">${esc(shape)}</text>`);
  });
  out.push(`<text x="${left + plotW / 2}" y="${H - 18}" text-anchor="middle">BH × N × D (Lq = Lk = N)</text>`);
  engines.forEach((engine, e) => {
    const ly = top + 10 + e * 20;
    out.push(`<rect x="${W - right + 15}" y="${ly - 10}" width="12" height="12" fill="${COLORS[e % COLORS.length]}"/>`);
    out.push(`<text x="${W - right + 33}" y="${ly}">${esc(labels[engine] ?? engine)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n');
}
