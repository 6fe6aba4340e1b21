import { useCallback, useEffect, useEffectEvent, useRef, useState } from 'react';
import { tail } from '../../src/client/index.js';
import type { TailEvent, TailOptions } from '../../src/client/index.js';
import { useAuth, useRetryAfterSignIn } from './auth.js';
import type { SignInReason } from './auth.js';
import { messageOf, statusOf } from './session.js';

export type { TailEvent, TailOptions };

/** The seam every view reads streams through: the SDK's `tail()`, or a fake in tests. */
export type TailFn = (options: TailOptions) => AsyncIterable<TailEvent>;

/** The SDK's `tail()` against the server that served the page. */
export const defaultTail: TailFn = (options) =>
  tail({ server: window.location.origin, ...options });

/** Where a followed stream stands, as a viewer needs to be told it. */
export type ConnectionState =
  | { phase: 'connecting' }
  | { phase: 'live' }
  | { phase: 'reconnecting'; attempt: number; delayMs: number; reason: string }
  | { phase: 'ended'; reason: string; status?: string | undefined }
  | { phase: 'failed'; error: string }
  /** The token expired or is gone (401): waiting for the viewer to sign in again. */
  | { phase: 'signedOut'; reason: SignInReason }
  /** 403: the token may not read this stream. */
  | { phase: 'forbidden'; error: string };

export interface FollowedStream {
  state: ConnectionState;
  /** Opens the stream again after it ended or failed, from the last entry seen. */
  resume(): void;
}

/**
 * Follows one stream for the component's lifetime: `connecting` until the server accepts, `live`
 * from then on, `reconnecting` while `tail()` waits to come back with its cursor, `ended` with the
 * server's reason, `failed` once `tail()` gave up. `key` names the stream: a new key opens a new
 * one. `resume()` reopens it after the last seq seen, so nothing is shown twice.
 *
 * A stream refused with 401, or ended with `tokenExpired`, is `signedOut`: it asks the app for a
 * sign-in and resumes by itself, from its cursor, once the viewer signed in again. A 403 is
 * `forbidden` (tried again after a sign-in too, since another token may allow it).
 */
export function useTail(
  tailFn: TailFn,
  key: string,
  options: Omit<TailOptions, 'signal'>,
  onEvent: (event: TailEvent) => void,
): FollowedStream {
  const [generation, setGeneration] = useState(0);
  // Which stream (key and generation) a state belongs to: a new one is `connecting` until its
  // own events arrive, without a render of the old state in between.
  const current = `${generation}:${key}`;
  const [reported, setReported] = useState<{ of: string; state: ConnectionState } | null>(null);
  const cursor = useRef<{ key: string; after: string } | null>(null);
  const auth = useAuth();

  // The latest options, tail function and handler, without reopening the stream when they change.
  const open = useEffectEvent((signal: AbortSignal, after: string | undefined) =>
    tailFn({ ...options, ...(after === undefined ? {} : { after }), signal }),
  );
  const deliver = useEffectEvent((event: TailEvent) => onEvent(event));
  const signInNeeded = useEffectEvent((reason: SignInReason) => auth.signInNeeded(reason));
  const signInsNow = useEffectEvent(() => auth.signIns);

  useEffect(() => {
    const controller = new AbortController();
    const report = (state: ConnectionState) => setReported({ of: current, state });
    const after = cursor.current?.key === key ? cursor.current.after : undefined;
    const signIns = signInsNow();
    void (async () => {
      try {
        for await (const event of open(controller.signal, after)) {
          if (controller.signal.aborted) return;
          if (event.type === 'reconnecting') {
            const { attempt, delayMs, reason } = event;
            report({ phase: 'reconnecting', attempt, delayMs, reason });
          } else if (event.type === 'end' && event.end.reason === 'tokenExpired') {
            if (signInsNow() !== signIns) {
              // Opened with the token of before the latest sign-in: go on with the new one.
              deliver(event);
              setGeneration((n) => n + 1);
              return;
            }
            report({ phase: 'signedOut', reason: 'tokenExpired' });
            signInNeeded('tokenExpired');
          } else if (event.type === 'end') {
            report({ phase: 'ended', reason: event.end.reason, status: event.end.status });
          } else {
            // `open`, or a frame from a tail() that does not say `open`: either way, live.
            setReported((previous) =>
              previous?.of === current && previous.state.phase === 'live'
                ? previous
                : { of: current, state: { phase: 'live' } },
            );
          }
          if (event.type === 'entry') cursor.current = { key, after: event.cursor };
          deliver(event);
          if (event.type === 'end') return;
        }
        if (!controller.signal.aborted) report({ phase: 'ended', reason: 'closed' });
      } catch (caught) {
        if (controller.signal.aborted) return;
        const status = statusOf(caught);
        if (status === 401 && signInsNow() !== signIns) {
          // Refused with the cookie of before the latest sign-in: try again with the new one.
          setGeneration((n) => n + 1);
        } else if (status === 401) {
          report({ phase: 'signedOut', reason: 'unauthenticated' });
          signInNeeded('unauthenticated');
        } else if (status === 403) {
          report({ phase: 'forbidden', error: messageOf(caught) });
        } else {
          report({ phase: 'failed', error: messageOf(caught) });
        }
      }
    })();
    return () => controller.abort();
  }, [key, current]);

  const resume = useCallback(() => setGeneration((n) => n + 1), []);
  const state: ConnectionState =
    reported?.of === current ? reported.state : { phase: 'connecting' };
  useRetryAfterSignIn(state.phase === 'signedOut' || state.phase === 'forbidden', resume);
  return { state, resume };
}
