import type { ThemeChoice } from './theme.js';
import { THEME_CHOICES, useTheme } from './theme.js';

const LABELS: Record<ThemeChoice, string> = { system: 'System', light: 'Light', dark: 'Dark' };

/** The top bar's theme control: System (follows the OS), Light or Dark. */
export function ThemeToggle() {
  const { choice, choose } = useTheme();
  return (
    <label className="theme-toggle">
      <span>Theme</span>
      <select value={choice} onChange={(event) => choose(event.target.value as ThemeChoice)}>
        {THEME_CHOICES.map((option) => (
          <option key={option} value={option}>
            {LABELS[option]}
          </option>
        ))}
      </select>
    </label>
  );
}
