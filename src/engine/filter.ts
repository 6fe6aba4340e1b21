import type { Entry } from '../model/entry.js';
import { LOG_KIND } from '../model/names.js';

/** OR within one field, AND across fields; an empty field matches everything. */
export interface EntryFilter {
  kinds?: readonly string[] | undefined;
  steps?: readonly string[] | undefined;
  correlationIds?: readonly string[] | undefined;
  /** A further condition of the endpoint's own (e.g. the runs feed's `?pipeline=`). */
  where?: ((entry: Entry) => boolean) | undefined;
  /**
   * Log entries up to and including this seq are left out: the viewer has their text already
   * (`?logAfter=`, docs/API.md). Catching up reads the other entries by index, not the log.
   */
  logThroughSeq?: number | undefined;
}

export type EntryPredicate = (entry: Entry) => boolean;

export function compileFilter(filter: EntryFilter): EntryPredicate | undefined {
  const kinds = nonEmptySet(filter.kinds);
  const steps = nonEmptySet(filter.steps);
  const correlationIds = nonEmptySet(filter.correlationIds);
  const where = filter.where;
  const logThrough = filter.logThroughSeq;
  if (!kinds && !steps && !correlationIds && !where && logThrough === undefined) return undefined;
  return (entry) =>
    (logThrough === undefined || entry.kind !== LOG_KIND || entry.seq > logThrough) &&
    (!where || where(entry)) &&
    (!kinds || kinds.has(entry.kind)) &&
    (!steps || (entry.step !== undefined && steps.has(entry.step))) &&
    (!correlationIds ||
      (entry.correlationId !== undefined && correlationIds.has(entry.correlationId)));
}

function nonEmptySet(values: readonly string[] | undefined): ReadonlySet<string> | undefined {
  return values && values.length > 0 ? new Set(values) : undefined;
}
