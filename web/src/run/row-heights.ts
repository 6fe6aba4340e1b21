/**
 * The heights of a list's rows, for drawing only those on screen: a row is `estimate` pixels
 * high until it is measured otherwise. Offsets are computed from the measured rows alone (their
 * indices in order, with running sums of how far each is from the estimate), so a list of a
 * million rows costs nothing per row, and a list that grows costs nothing more. Rows are
 * measured only where they differ (wrapped lines, as they are drawn), so few are ever kept.
 */
export class RowHeights {
  private readonly measured = new Map<number, number>();
  /** The measured rows' indices in order, and before each how far the rows before it add up. */
  private indices: number[] = [];
  private extras: number[] = [0];
  private stale = false;

  constructor(readonly estimate: number) {}

  /** Records a row's height; says whether it changed. */
  set(index: number, height: number): boolean {
    const known = this.measured.get(index) ?? this.estimate;
    if (known === height) return false;
    if (height === this.estimate) this.measured.delete(index);
    else this.measured.set(index, height);
    this.stale = true;
    return true;
  }

  /** Forgets every measurement (the rows changed width, or what they hold). */
  clear(): void {
    if (this.measured.size === 0) return;
    this.measured.clear();
    this.stale = true;
  }

  sizeOf(index: number): number {
    return this.measured.get(index) ?? this.estimate;
  }

  /** Where row `index` begins: the height of the rows before it. */
  offsetOf(index: number): number {
    return index * this.estimate + this.extraBefore(index);
  }

  /** The height of rows [0, count). */
  total(count: number): number {
    return this.offsetOf(count);
  }

  /** The row at `offset` px of a list of `count` rows (the last one past its end). */
  indexAt(offset: number, count: number): number {
    if (count <= 0) return 0;
    let low = 0;
    let high = count - 1;
    if (this.measured.size === 0) {
      return Math.min(high, Math.max(0, Math.floor(offset / this.estimate)));
    }
    // The last row that begins at or before `offset`.
    while (low < high) {
      const middle = (low + high + 1) >>> 1;
      if (this.offsetOf(middle) <= offset) low = middle;
      else high = middle - 1;
    }
    return low;
  }

  private extraBefore(index: number): number {
    if (this.measured.size === 0) return 0;
    if (this.stale) this.reindex();
    const { indices } = this;
    // How many measured rows come before `index`.
    let low = 0;
    let high = indices.length;
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (indices[middle]! < index) low = middle + 1;
      else high = middle;
    }
    return this.extras[low]!;
  }

  private reindex(): void {
    this.indices = [...this.measured.keys()].sort((a, b) => a - b);
    this.extras = [0];
    let sum = 0;
    for (const index of this.indices) {
      sum += this.measured.get(index)! - this.estimate;
      this.extras.push(sum);
    }
    this.stale = false;
  }
}
