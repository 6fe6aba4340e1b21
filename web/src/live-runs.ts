import { isTerminal } from '../../src/client/index.js';
import type { Run } from '../../src/model/run.js';

/**
 * A run as the runs feed tells it (`data` of a `status` entry: the run without its meta), or
 * null for an entry that is not one. `deleted` marks a run that was deleted.
 */
export function feedRun(data: unknown): (Run & { deleted?: boolean }) | null {
  const run = data as (Run & { deleted?: boolean }) | null;
  if (!run || typeof run.pipeline !== 'string' || typeof run.runId !== 'string') return null;
  return run;
}

/**
 * The known copy of a run updated by a fresher one from the feed. A terminal status is final
 * (docs/API.md), so a non-terminal copy, older news the feed replays on opening, never replaces
 * it; the meta stays the listing's, since the feed leaves it out.
 */
export function newerRun(known: Run, fresh: Run): Run {
  if (isTerminal(known.status) && !isTerminal(fresh.status)) return known;
  return {
    ...known,
    ...fresh,
    meta: known.meta,
    lastSeq: Math.max(known.lastSeq, fresh.lastSeq),
    logBytes: Math.max(known.logBytes, fresh.logBytes),
  };
}
