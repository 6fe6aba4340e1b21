import { useCallback, useLayoutEffect, useMemo, useReducer, useRef, useState } from 'react';
import type { RefObject } from 'react';
import { RowHeights } from './row-heights.js';

/** A row to draw: its index, where it begins and how high it is (px). */
export interface WindowRow {
  index: number;
  start: number;
  size: number;
}

export interface RowWindow {
  /** The height of every row together: the scrolled content's. */
  totalSize: number;
  rows: WindowRow[];
  /** Scrolls row `index` to the middle of the view. */
  scrollToIndex(index: number): void;
}

interface Viewport {
  top: number;
  height: number;
  width: number;
}

/**
 * The rows of a long list that are in view, and `overscan` more on each side, for the scroll
 * element `scrollRef` whose content (`contentRef`, its rows' parent, each row with a
 * `data-index`) is `count` rows. Each row is `estimate` px high, unless `measure`: then rows are
 * measured once drawn (wrapped lines) and placed by what they measured. With `pinBottom` (follow
 * mode) the list is drawn from its end, wherever it was last scrolled to, so rows that arrive
 * are drawn at the end in the frame they arrive in, not one scroll event later.
 *
 * Not a general virtualizer's per-row bookkeeping: one that lays out every row again when the
 * list grows spends tens of milliseconds a frame on a log of a million lines that is still
 * arriving (docs/BENCHMARKS.md, "Dashboard"). Here a frame costs the rows drawn.
 */
export function useRowWindow({
  scrollRef,
  contentRef,
  count,
  estimate,
  overscan,
  measure,
  pinBottom,
}: {
  scrollRef: RefObject<HTMLElement | null>;
  contentRef: RefObject<HTMLElement | null>;
  count: number;
  estimate: number;
  overscan: number;
  measure: boolean;
  pinBottom: boolean;
}): RowWindow {
  const heights = useMemo(() => new RowHeights(estimate), [estimate]);
  const [viewport, setViewport] = useState<Viewport>({ top: 0, height: 0, width: 0 });
  const [, remeasured] = useReducer((n: number) => n + 1, 0);
  /** A row scrolled to the middle: it is kept there while the rows around it are measured. */
  const centred = useRef<number | null>(null);

  const readViewport = useCallback(() => {
    const element = scrollRef.current;
    if (!element) return;
    const next = {
      top: element.scrollTop,
      height: element.clientHeight,
      width: element.clientWidth,
    };
    setViewport((last) =>
      next.top === last.top && next.height === last.height && next.width === last.width
        ? last
        : next,
    );
  }, [scrollRef]);

  useLayoutEffect(() => {
    const element = scrollRef.current;
    if (!element) return;
    readViewport();
    // A scroll reads only where it is: the size comes from the observer, and reading it here
    // would lay the page out again mid-frame. It is drawn in the next task, not in the scroll
    // event (flushSync): with 20 rows drawn beyond each edge a scroll of up to 400 px a frame
    // shows no gap, and a flick of 600 px a frame drew 17 frames of 180 late when drawn in the
    // event (docs/BENCHMARKS.md, "Dashboard").
    const onScroll = () => {
      const top = element.scrollTop;
      setViewport((viewport) => (viewport.top === top ? viewport : { ...viewport, top }));
    };
    element.addEventListener('scroll', onScroll, { passive: true });
    // jsdom has no ResizeObserver; its elements never change size anyway.
    const observer =
      typeof ResizeObserver === 'function' ? new ResizeObserver(readViewport) : undefined;
    observer?.observe(element);
    return () => {
      element.removeEventListener('scroll', onScroll);
      observer?.disconnect();
    };
  }, [scrollRef, readViewport]);

  // Rows wrap differently at another width, and are all one height without wrapping.
  useLayoutEffect(() => {
    heights.clear();
    remeasured();
  }, [heights, measure, viewport.width]);

  const scrollToIndex = useCallback(
    (index: number) => {
      const element = scrollRef.current;
      if (!element) return;
      const middle = heights.offsetOf(index) - (element.clientHeight - heights.sizeOf(index)) / 2;
      element.scrollTop = Math.max(0, middle);
      centred.current = index;
      readViewport();
    },
    [heights, scrollRef, readViewport],
  );

  // After every render: the rows drawn are measured; if any changed, they are drawn again where
  // they now belong (and a row scrolled to is put back in the middle).
  useLayoutEffect(() => {
    const content = contentRef.current;
    if (!measure || !content) return;
    let changed = false;
    for (const row of content.children) {
      const index = Number((row as HTMLElement).dataset['index']);
      const height = row.getBoundingClientRect().height;
      // Not laid out (hidden, or jsdom): nothing was measured.
      if (Number.isInteger(index) && height > 0) changed = heights.set(index, height) || changed;
    }
    if (!changed) {
      centred.current = null;
      return;
    }
    if (centred.current !== null) scrollToIndex(centred.current);
    remeasured();
  });

  const totalSize = heights.total(count);
  const top = pinBottom ? Math.max(0, totalSize - viewport.height) : viewport.top;
  const rows: WindowRow[] = [];
  if (count > 0) {
    const first = Math.max(0, heights.indexAt(top, count) - overscan);
    const last = Math.min(count - 1, heights.indexAt(top + viewport.height, count) + overscan);
    let start = heights.offsetOf(first);
    for (let index = first; index <= last; index += 1) {
      const size = heights.sizeOf(index);
      rows.push({ index, start, size });
      start += size;
    }
  }
  return { totalSize, rows, scrollToIndex };
}
