/**
 * A stand-in for `window.matchMedia('(prefers-color-scheme: dark)')` (jsdom has none): the test
 * says what the system prefers and fires its `change`, as a browser does when the OS setting moves.
 */
export interface FakeColorScheme {
  setDark(dark: boolean): void;
  restore(): void;
}

export function fakeColorScheme(dark: boolean): FakeColorScheme {
  let matches = dark;
  const listeners = new Set<(event: MediaQueryListEvent) => void>();
  const original = window.matchMedia;
  window.matchMedia = (query: string) =>
    ({
      media: query,
      get matches() {
        return query === '(prefers-color-scheme: dark)' ? matches : false;
      },
      addEventListener: (_type: string, listener: (event: MediaQueryListEvent) => void) =>
        listeners.add(listener),
      removeEventListener: (_type: string, listener: (event: MediaQueryListEvent) => void) =>
        listeners.delete(listener),
    }) as unknown as MediaQueryList;
  return {
    setDark(next) {
      matches = next;
      for (const listener of [...listeners]) listener({ matches: next } as MediaQueryListEvent);
    },
    restore() {
      window.matchMedia = original;
    },
  };
}
