import { useEffect, useState } from 'react';

/** What the viewer chose in the top bar; `system` follows `prefers-color-scheme`. */
export type ThemeChoice = 'system' | 'light' | 'dark';
export type Theme = 'light' | 'dark';

export const THEME_CHOICES: readonly ThemeChoice[] = ['system', 'light', 'dark'];
export const THEME_STORAGE_KEY = 'tailwater.theme';
const DARK_QUERY = '(prefers-color-scheme: dark)';

function isChoice(value: unknown): value is ThemeChoice {
  return THEME_CHOICES.includes(value as ThemeChoice);
}

/** The remembered choice; `system` when there is none (or storage is refused, as in some private windows). */
export function storedChoice(): ThemeChoice {
  try {
    const value = window.localStorage.getItem(THEME_STORAGE_KEY);
    return isChoice(value) ? value : 'system';
  } catch {
    return 'system';
  }
}

function storeChoice(choice: ThemeChoice): void {
  try {
    window.localStorage.setItem(THEME_STORAGE_KEY, choice);
  } catch {
    // Not remembered: the choice still holds for this page.
  }
}

function systemPrefersDark(): boolean {
  return typeof window.matchMedia === 'function' && window.matchMedia(DARK_QUERY).matches;
}

export function resolveTheme(choice: ThemeChoice): Theme {
  if (choice !== 'system') return choice;
  return systemPrefersDark() ? 'dark' : 'light';
}

/** Sets `data-theme` on <html>, which the stylesheets' colours hang on (theme.css). */
export function applyTheme(theme: Theme): void {
  document.documentElement.dataset['theme'] = theme;
}

/**
 * The theme choice and its setter, remembered in localStorage, with `data-theme` kept in step:
 * on a choice, and, while the choice is `system`, whenever the system setting changes.
 */
export function useTheme(): {
  choice: ThemeChoice;
  theme: Theme;
  choose(choice: ThemeChoice): void;
} {
  const [choice, setChoice] = useState<ThemeChoice>(storedChoice);
  const [systemDark, setSystemDark] = useState(systemPrefersDark);
  useEffect(() => {
    if (typeof window.matchMedia !== 'function') return;
    const query = window.matchMedia(DARK_QUERY);
    const onChange = () => setSystemDark(query.matches);
    query.addEventListener('change', onChange);
    return () => query.removeEventListener('change', onChange);
  }, []);
  const theme: Theme = choice === 'system' ? (systemDark ? 'dark' : 'light') : choice;
  useEffect(() => applyTheme(theme), [theme]);
  const choose = (next: ThemeChoice) => {
    storeChoice(next);
    setChoice(next);
  };
  return { choice, theme, choose };
}

/** The `data-theme` of <html> as it changes: for what cannot use var(--…), such as a canvas. */
export function useDocumentTheme(): string | undefined {
  const [theme, setTheme] = useState(() => document.documentElement.dataset['theme']);
  useEffect(() => {
    const root = document.documentElement;
    const observer = new MutationObserver(() => setTheme(root.dataset['theme']));
    observer.observe(root, { attributes: true, attributeFilter: ['data-theme'] });
    return () => observer.disconnect();
  }, []);
  return theme;
}
