// Light/dark theme: the system setting (prefers-color-scheme) decides until the reader picks one with
// the toggle; the pick is remembered in localStorage and set as <html data-theme> (index.html applies
// it before the first paint).
const KEY = 'sdpa-theme';
const media = matchMedia('(prefers-color-scheme: dark)');

export function currentTheme(): 'light' | 'dark' {
  const t = document.documentElement.dataset.theme;
  return t === 'dark' || t === 'light' ? t : media.matches ? 'dark' : 'light';
}

export function mountTheme(button: HTMLButtonElement): void {
  const sync = () => {
    const dark = currentTheme() === 'dark';
    button.setAttribute('aria-pressed', String(dark));
    button.textContent = dark ? '☀ Light' : '☾ Dark';
    button.setAttribute('aria-label', dark ? 'Switch to the light theme' : 'Switch to the dark theme');
  };
  button.addEventListener('click', () => {
    const next = currentTheme() === 'dark' ? 'light' : 'dark';
    document.documentElement.dataset.theme = next;
    try {
      localStorage.setItem(KEY, next);
    } catch {
      // Storage blocked (private mode): the choice lasts for this visit only.
    }
    sync();
  });
  media.addEventListener('change', sync);
  sync();
}
