import { useCallback, useEffect, useRef, useState } from 'react';
import type { RefObject } from 'react';

/** Ticks once a second while `running`, so elapsed time moves. */
export function useNow(running: boolean): number {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    if (!running) return;
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [running]);
  return now;
}

/** One frame's time: a render of the log at most this often while text pours in. */
const FRAME_MS = 16;

/**
 * A version counter for data changed in place, bumped at most once a frame: history arrives as
 * hundreds of entries a second, and each render of the virtualized log costs time in proportion
 * to its length, so one render per frame instead of one per entry.
 */
export function useFrameVersion(): [number, () => void] {
  const [version, setVersion] = useState(0);
  const pending = useRef<ReturnType<typeof setTimeout> | null>(null);
  useEffect(() => () => clearTimeout(pending.current ?? undefined), []);
  const bump = useCallback(() => {
    if (pending.current !== null) return;
    pending.current = setTimeout(() => {
      pending.current = null;
      setVersion((n) => n + 1);
    }, FRAME_MS);
  }, []);
  return [version, bump];
}

/** Whether a key press belongs to a field being typed in, rather than to the page. */
function typingIn(target: EventTarget | null): boolean {
  if (!(target instanceof HTMLElement)) return false;
  return ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName) || target.isContentEditable;
}

/** `/` anywhere on the page (outside a field) puts the cursor in the search box, as on GitHub. */
export function useSlashToFocus(input: RefObject<HTMLInputElement | null>): void {
  useEffect(() => {
    const onKeyDown = (event: KeyboardEvent) => {
      if (event.key !== '/' || event.ctrlKey || event.metaKey || event.altKey) return;
      if (typingIn(event.target)) return;
      event.preventDefault();
      input.current?.focus();
    };
    window.addEventListener('keydown', onKeyDown);
    return () => window.removeEventListener('keydown', onKeyDown);
  }, [input]);
}

/**
 * A page's filters, kept in its address: read from the query it opens with, and each change
 * told (`onSearch`) as the query to replace the address's with, so a filtered page can be
 * linked and reloaded.
 */
export function useAddressFilters<F>(
  search: string,
  onSearch: ((search: string) => void) | undefined,
  parse: (search: string) => F,
  format: (filters: F) => string,
): [F, (change: (filters: F) => F) => void] {
  const [filters, setFilters] = useState<F>(() => parse(search));
  const change = (how: (filters: F) => F) => {
    const next = how(filters);
    setFilters(next);
    onSearch?.(format(next));
  };
  return [filters, change];
}
