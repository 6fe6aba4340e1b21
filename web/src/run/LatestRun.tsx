import { useEffect, useEffectEvent, useState } from 'react';
import { TailwaterClient, TailwaterClientError } from '../../../src/client/index.js';
import { NotAllowed, useAuth, useRetryAfterSignIn } from '../auth.js';
import { messageOf, statusOf } from '../session.js';
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

type Resolution =
  | { runId: string }
  | { waiting: true }
  | { error: string }
  /** 401: asked again once the viewer signed in. */
  | { signIn: true }
  | { forbidden: string }
  | null;

/**
 * `/ui/pipelines/{fqn}/runs/latest`: the newest run, resolved to its id once when the page opens
 * (as `tailwater tail` does), so that a reconnect keeps following that run and its cursor, even
 * after a newer run starts. Until the pipeline has a run, it waits for one. Refused with 401, it
 * asks for a sign-in and tries again after it; with 403 it says the pipeline is not allowed.
 */
export function LatestRun({
  pipeline,
  tail,
  resolveRun = defaultResolveRun,
  targetLine = null,
  targetLastLine = null,
  targetMove = 0,
}: {
  pipeline: string;
  tail?: TailFn | undefined;
  resolveRun?: ResolveRun | undefined;
  /** The line to show (`#L…`), as RunView takes it. */
  targetLine?: number | null;
  targetLastLine?: number | null;
  targetMove?: number;
}) {
  const [resolution, setResolution] = useState<Resolution>(null);
  const [attempts, setAttempts] = useState(0);
  const auth = useAuth();
  const signInNeeded = useEffectEvent(() => auth.signInNeeded('unauthenticated'));
  const waiting = resolution !== null && ('signIn' in resolution || 'forbidden' in resolution);
  useRetryAfterSignIn(waiting, () => setAttempts((n) => n + 1));
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
        const status = statusOf(error);
        if (status === 401) {
          setResolution({ signIn: true });
          signInNeeded();
        } else if (status === 403) {
          setResolution({ forbidden: messageOf(error) });
        } else {
          setResolution({ error: messageOf(error) });
          timer = setTimeout(() => void attempt(), WAIT_MS);
        }
      }
    };
    void attempt();
    return () => {
      stopped = true;
      clearTimeout(timer);
    };
  }, [pipeline, resolveRun, attempts]);

  if (resolution && 'runId' in resolution) {
    return (
      <RunView
        pipeline={pipeline}
        runId={resolution.runId}
        {...(tail ? { tail } : {})}
        latest
        targetLine={targetLine}
        targetLastLine={targetLastLine}
        targetMove={targetMove}
      />
    );
  }
  if (resolution && 'forbidden' in resolution) {
    return (
      <section className="run-view">
        <h1>{pipeline} / latest</h1>
        <NotAllowed what={`pipeline ${pipeline}`} detail={resolution.forbidden} />
      </section>
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
            : 'signIn' in resolution
              ? 'Waiting for you to sign in again…'
              : `Cannot find the latest run (${resolution.error}); trying again…`}
      </p>
    </section>
  );
}
