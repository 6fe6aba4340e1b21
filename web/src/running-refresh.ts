import { useEffect, useEffectEvent } from 'react';
import { TailwaterClient } from '../../src/client/index.js';
import type { Run } from '../../src/model/run.js';
import { useAuth } from './auth.js';
import { statusOf } from './session.js';

/** A pipeline's running runs, as `GET /api/v1/pipelines/{fqn}/runs?status=running` lists them. */
export type ListRunning = (pipeline: string) => Promise<Run[]>;

export const defaultListRunning: ListRunning = (pipeline) =>
  new TailwaterClient({ server: window.location.origin }).listRuns(pipeline, {
    status: 'running',
    limit: 100,
  });

export const REFRESH_MS = 5000;

/** The feed's copy of a run, with the growing numbers of a fresher listing of it. */
export function withGrowth(run: Run, listed: Run): Run {
  if (listed.lastSeq <= run.lastSeq && listed.logBytes <= run.logBytes) return run;
  return {
    ...run,
    lastSeq: Math.max(run.lastSeq, listed.lastSeq),
    logBytes: Math.max(run.logBytes, listed.logBytes),
  };
}

/**
 * The runs feed says when a run's status changes, not how its log grows: while some runs are
 * running (and the page is visible), their pipelines' running runs are listed every `everyMs`
 * and `onListed` merges what grew. Only the numbers that only grow are taken from the listing;
 * the status stays the feed's, which is never older. A listing refused with 401 (the token
 * expired, the cookie is gone) asks for a sign-in.
 */
export function useRunningRefresh(
  pipelines: readonly string[],
  listRunning: ListRunning,
  onListed: (runs: Run[]) => void,
  everyMs = REFRESH_MS,
): void {
  const key = pipelines.join('\u0000');
  const auth = useAuth();
  const signInNeeded = useEffectEvent(() => auth.signInNeeded('unauthenticated'));
  useEffect(() => {
    if (key === '') return;
    const names = key.split('\u0000');
    let stopped = false;
    const refresh = async () => {
      if (document.visibilityState === 'hidden') return;
      for (const pipeline of names) {
        try {
          const runs = await listRunning(pipeline);
          if (!stopped) onListed(runs);
        } catch (error) {
          // The next refresh tries again; the stream's own state says if the server is gone.
          if (!stopped && statusOf(error) === 401) signInNeeded();
        }
      }
    };
    const timer = setInterval(() => void refresh(), everyMs);
    return () => {
      stopped = true;
      clearInterval(timer);
    };
  }, [key, listRunning, onListed, everyMs]);
}
