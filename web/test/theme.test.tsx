import { act, fireEvent, render, screen } from '@testing-library/react';
import { afterEach, describe, expect, test } from 'vitest';
import { resolveTheme, storedChoice, THEME_STORAGE_KEY } from '../src/theme/theme.js';
import { ThemeToggle } from '../src/theme/ThemeToggle.js';
import { fakeColorScheme } from './fake-media.js';
import type { FakeColorScheme } from './fake-media.js';

const themeOfPage = () => document.documentElement.dataset['theme'];
const toggle = () => screen.getByRole('combobox', { name: 'Theme' }) as HTMLSelectElement;

describe('theme', () => {
  let scheme: FakeColorScheme | null = null;
  afterEach(() => {
    scheme?.restore();
    scheme = null;
    window.localStorage.clear();
    delete document.documentElement.dataset['theme'];
  });

  test('follows the system setting while the choice is System, as it changes', () => {
    scheme = fakeColorScheme(false);
    render(<ThemeToggle />);
    expect(toggle().value).toBe('system');
    expect(themeOfPage()).toBe('light');
    act(() => scheme!.setDark(true));
    expect(themeOfPage()).toBe('dark');
    act(() => scheme!.setDark(false));
    expect(themeOfPage()).toBe('light');
  });

  test('a chosen theme holds whatever the system says, and is remembered', () => {
    scheme = fakeColorScheme(false);
    const { unmount } = render(<ThemeToggle />);
    fireEvent.change(toggle(), { target: { value: 'dark' } });
    expect(themeOfPage()).toBe('dark');
    expect(window.localStorage.getItem(THEME_STORAGE_KEY)).toBe('dark');
    act(() => scheme!.setDark(false));
    expect(themeOfPage()).toBe('dark');

    unmount();
    delete document.documentElement.dataset['theme'];
    render(<ThemeToggle />);
    expect(toggle().value).toBe('dark');
    expect(themeOfPage()).toBe('dark');

    // Back to System: the system's setting again.
    fireEvent.change(toggle(), { target: { value: 'system' } });
    expect(window.localStorage.getItem(THEME_STORAGE_KEY)).toBe('system');
    expect(themeOfPage()).toBe('light');
    act(() => scheme!.setDark(true));
    expect(themeOfPage()).toBe('dark');
  });

  test('the theme before the first render: the remembered choice, else the system', () => {
    scheme = fakeColorScheme(true);
    expect(resolveTheme(storedChoice())).toBe('dark');
    window.localStorage.setItem(THEME_STORAGE_KEY, 'light');
    expect(resolveTheme(storedChoice())).toBe('light');
    window.localStorage.setItem(THEME_STORAGE_KEY, 'purple');
    expect(storedChoice()).toBe('system');
  });
});
