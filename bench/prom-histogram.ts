/**
 * Reads one labelled series of a Prometheus histogram from /metrics text, and estimates its
 * quantiles over an interval the way PromQL's histogram_quantile does (linear within a bucket),
 * from the difference of two scrapes.
 */

/** Cumulative counts by upper bound (seconds), `+Inf` last. */
export type Buckets = Array<{ le: number; count: number }>;

export function histogramBuckets(
  text: string,
  name: string,
  label: string,
  value: string,
): Buckets {
  const buckets: Buckets = [];
  const prefix = `${name}_bucket{`;
  for (const line of text.split('\n')) {
    if (!line.startsWith(prefix)) continue;
    const match = /\{([^}]*)\} (\S+)$/.exec(line);
    if (!match) continue;
    const labels = new Map(
      [...match[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!] as const),
    );
    if (labels.get(label) !== value) continue;
    const le = labels.get('le') === '+Inf' ? Number.POSITIVE_INFINITY : Number(labels.get('le'));
    buckets.push({ le, count: Number(match[2]) });
  }
  return buckets.sort((a, b) => a.le - b.le);
}

/** `after` minus `before`, bucket by bucket (a series absent before counts from 0). */
export function bucketsSince(before: Buckets, after: Buckets): Buckets {
  return after.map(({ le, count }) => ({
    le,
    count: count - (before.find((b) => b.le === le)?.count ?? 0),
  }));
}

/** The q-quantile in seconds, or undefined with no observations; capped at the last finite bound. */
export function quantile(buckets: Buckets, q: number): number | undefined {
  const total = buckets[buckets.length - 1]?.count ?? 0;
  if (total === 0) return undefined;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const { le, count } of buckets) {
    if (count >= rank) {
      if (!Number.isFinite(le)) return lower;
      return lower + ((le - lower) * (rank - below)) / Math.max(count - below, 1);
    }
    lower = le;
    below = count;
  }
  return lower;
}
