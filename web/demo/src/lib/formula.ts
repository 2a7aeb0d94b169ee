// The general formula and its five steps (KaTeX sources), typeset when the page is built.
export const FORMULA = '\\operatorname{Attention}(Q, K, V) = \\operatorname{softmax}\\!\\left(\\frac{QK^{\\top}}{\\sqrt{d_k}} + M\\right) V';

/** The stages of the general formula, for the overview strip: TeX label and what it does. */
export const OVERVIEW: [string, string][] = [
  ['QK^{\\top}', 'compare every query with every key'],
  ['\\div\\sqrt{d_k}', 'keep the variance near 1'],
  ['+\\,M', 'mask: −∞ where not allowed'],
  ['\\operatorname{softmax}', 'rows become distributions'],
  ['\\cdot\\, V', 'weighted average of values'],
];
