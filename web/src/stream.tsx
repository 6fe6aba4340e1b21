import { useEffect, useRef, useState } from 'react';
import { tail } from '../../src/client/tail.js';
import type { TailEvent, TailOptions } from '../../src/client/tail.js';

export type { TailEvent, TailOptions };

/** The seam every view reads streams through: the SDK's `tail()`, or a fake in tests. */
export type TailFn = (options: TailOptions) => AsyncIterable<TailEvent>;

/** The SDK's `tail()` against the server that served the page. */
export const defaultTail: TailFn = (options) =>
  tail({ server: window.location.origin, ...options });

export type ConnectionStatus = 'CONNECTING' | 'CONNECTED' | 'DISCONNECTED';

/**
 * Follows one stream for the component's lifetime. The status is CONNECTING until the stream
 * delivers something, CONNECTING again while `tail()` reconnects, and DISCONNECTED once it gave
 * up (or the stream ended). `key` names the stream: a new key opens a new one.
 */
export function useTail(
  tailFn: TailFn,
  key: string,
  options: Omit<TailOptions, 'signal'>,
  onEvent: (event: TailEvent) => void,
): { status: ConnectionStatus; error: string | null } {
  const [status, setStatus] = useState<ConnectionStatus>('CONNECTING');
  const [error, setError] = useState<string | null>(null);
  const latest = useRef({ options, onEvent, tailFn });
  latest.current = { options, onEvent, tailFn };

  useEffect(() => {
    const controller = new AbortController();
    const { options: opts, tailFn: fn } = latest.current;
    setStatus('CONNECTING');
    setError(null);
    void (async () => {
      try {
        for await (const event of fn({ ...opts, signal: controller.signal })) {
          if (controller.signal.aborted) return;
          if (event.type === 'reconnecting') {
            setStatus('CONNECTING');
            setError(event.reason);
          } else {
            setStatus('CONNECTED');
            setError(null);
          }
          latest.current.onEvent(event);
          if (event.type === 'end') {
            setStatus('DISCONNECTED');
            return;
          }
        }
        if (!controller.signal.aborted) setStatus('DISCONNECTED');
      } catch (caught) {
        if (controller.signal.aborted) return;
        setStatus('DISCONNECTED');
        setError(caught instanceof Error ? caught.message : String(caught));
      }
    })();
    return () => controller.abort();
  }, [key]);

  return { status, error };
}

export function ConnectionBadge({
  status,
  error,
}: {
  status: ConnectionStatus;
  error: string | null;
}) {
  return (
    <div data-testid="connection-status" className={`status status-${status.toLowerCase()}`}>
      Connection Status: <span>{status}</span>
      {error ? <span className="status-error"> ({error})</span> : null}
    </div>
  );
}
