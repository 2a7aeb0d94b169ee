// Numeric fields checked where the reader types: a whole number within a stated range, or a message
// next to the field (and aria-invalid) saying what is wanted.
import { el } from './tensors';

/** The message element beside `input` (id `<input id>-error`), created on first use. */
export function fieldMessage(input: HTMLInputElement): HTMLElement {
  const id = `${input.id}-error`;
  let msg = document.getElementById(id);
  if (!msg) {
    msg = el('span', { id, class: 'field-error error-text', role: 'alert' });
    input.insertAdjacentElement('afterend', msg);
    input.setAttribute('aria-describedby', [input.getAttribute('aria-describedby'), id].filter(Boolean).join(' '));
  }
  return msg;
}

/** Why `text` is not a whole number from `min` to `max`, or undefined when it is one. */
export function wholeNumberProblem(text: string, name: string, min: number, max: number): string | undefined {
  const range = `a whole number from ${min.toLocaleString('en')} to ${max.toLocaleString('en')}`;
  const t = text.trim();
  if (t === '') return `${name}: empty; ${range}, please.`;
  const n = Number(t);
  if (!Number.isFinite(n)) return `${name}: “${t}” is not a number; ${range}, please.`;
  if (n > max) return `${name}: ${t} is too large (max ${max.toLocaleString('en')}); ${range}, please.`;
  if (n < min) return `${name}: ${t} is too small (min ${min.toLocaleString('en')}); ${range}, please.`;
  if (!Number.isInteger(n)) return `${name}: ${t} is not a whole number; ${range}, please.`;
  return undefined;
}

/**
 * The whole number in `input` (from `min` to `max`), or undefined with the reason shown beside the
 * field; a valid value clears the message.
 */
export function readWholeNumber(input: HTMLInputElement, name: string, min: number, max: number): number | undefined {
  const problem = wholeNumberProblem(input.value, name, min, max);
  fieldMessage(input).textContent = problem ?? '';
  if (problem) input.setAttribute('aria-invalid', 'true');
  else input.removeAttribute('aria-invalid');
  return problem ? undefined : Number(input.value.trim());
}
