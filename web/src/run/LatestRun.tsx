import { useEffect, useState } from 'react';
import { TailwaterClientError } from '../../../src/client/errors.js';
import { TailwaterClient } from '../../../src/client/http-client.js';
import type { TailFn } from '../stream.js';
import { RunView } from './RunView.js';

/** The concrete id of a run (`latest` allowed), or null while the pipeline has no such run. */
export type ResolveRun = (pipeline: string, runId: string) => Promise<string | null>;

export const defaultResolveRun: ResolveRun = async (pipeline, runId) => {
  try {
    return (await new TailwaterClient({ server: window.location.origin }).getRun(pipeline, runId))
      .runId;
  } catch (error) {
    if (error instanceof TailwaterClientError && error.status === 404) return null;
    throw error;
  }
};

const WAIT_MS = 2000;

type Resolution = { runId: string } | { waiting: true } | { error: string } | null;

/**
 * `/ui/pipelines/{fqn}/runs/latest`: the newest run, resolved to its id once when the page opens
 * (as `tailwater tail` does), so that a reconnect keeps following that run and its cursor, even
 * after a newer run starts. Until the pipeline has a run, it waits for one.
 */
export function LatestRun({
  pipeline,
  tail,
  resolveRun = defaultResolveRun,
}: {
  pipeline: string;
  tail?: TailFn | undefined;
  resolveRun?: ResolveRun | undefined;
}) {
  const [resolution, setResolution] = useState<Resolution>(null);
  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const attempt = async () => {
      try {
        const runId = await resolveRun(pipeline, 'latest');
        if (stopped) return;
        setResolution(runId === null ? { waiting: true } : { runId });
        if (runId === null) timer = setTimeout(() => void attempt(), WAIT_MS);
      } catch (error) {
        if (stopped) return;
        setResolution({ error: error instanceof Error ? error.message : String(error) });
        timer = setTimeout(() => void attempt(), WAIT_MS);
      }
    };
    void attempt();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [pipeline, resolveRun]);

  if (resolution && 'runId' in resolution) {
    return (
      <RunView pipeline={pipeline} runId={resolution.runId} {...(tail ? { tail } : {})} latest />
    );
  }
  return (
    <section className="run-view">
      <h1>{pipeline} / latest</h1>
      <p role="status">
        {resolution === null
          ? 'Finding the latest run…'
          : 'waiting' in resolution
            ? `${pipeline} has no runs yet; waiting for one to start…`
            : `Cannot find the latest run (${resolution.error}); trying again…`}
      </p>
    </section>
  );
}
