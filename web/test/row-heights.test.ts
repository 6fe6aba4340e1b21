import { describe, expect, test } from 'vitest';
import { RowHeights } from '../src/run/row-heights.js';

/** The same answers the slow way: every row's height summed. */
function reference(heightOf: (index: number) => number) {
  const offsetOf = (index: number) => {
    let sum = 0;
    for (let i = 0; i < index; i += 1) sum += heightOf(i);
    return sum;
  };
  const indexAt = (offset: number, count: number) => {
    let index = 0;
    while (index + 1 < count && offsetOf(index + 1) <= offset) index += 1;
    return index;
  };
  return { offsetOf, indexAt };
}

describe('row heights', () => {
  test('unmeasured rows are the estimate: offsets, total and the row at an offset', () => {
    const heights = new RowHeights(20);
    expect(heights.offsetOf(1_000_000)).toBe(20_000_000);
    expect(heights.total(3)).toBe(60);
    expect(heights.indexAt(0, 3)).toBe(0);
    expect(heights.indexAt(39.9, 3)).toBe(1);
    expect(heights.indexAt(40, 3)).toBe(2);
    // Past the end: the last row; before the start: the first.
    expect(heights.indexAt(10_000, 3)).toBe(2);
    expect(heights.indexAt(-5, 3)).toBe(0);
    expect(heights.indexAt(0, 0)).toBe(0);
  });

  test('measured rows move every row after them, and the row at each offset is the right one', () => {
    const heights = new RowHeights(20);
    const sizes = new Map<number, number>([
      [0, 45],
      [3, 20],
      [7, 60.5],
      [8, 5],
      [19, 100],
    ]);
    for (const [index, size] of sizes) heights.set(index, size);
    const slow = reference((index) => sizes.get(index) ?? 20);
    for (let index = 0; index <= 20; index += 1) {
      expect(heights.offsetOf(index), `offset of ${index}`).toBe(slow.offsetOf(index));
      expect(heights.sizeOf(index)).toBe(sizes.get(index) ?? 20);
    }
    for (let offset = -1; offset <= slow.offsetOf(20) + 1; offset += 0.5) {
      expect(heights.indexAt(offset, 20), `row at ${offset}`).toBe(slow.indexAt(offset, 20));
    }
    expect(heights.total(20)).toBe(slow.offsetOf(20));
  });

  test('set says whether a height changed; clear forgets every measurement', () => {
    const heights = new RowHeights(20);
    expect(heights.set(4, 20)).toBe(false);
    expect(heights.set(4, 33)).toBe(true);
    expect(heights.set(4, 33)).toBe(false);
    expect(heights.offsetOf(5)).toBe(5 * 20 + 13);
    // Measured back at the estimate: as if never measured.
    expect(heights.set(4, 20)).toBe(true);
    expect(heights.offsetOf(5)).toBe(100);
    heights.set(2, 50);
    heights.clear();
    expect(heights.offsetOf(10)).toBe(200);
    expect(heights.sizeOf(2)).toBe(20);
  });
});
