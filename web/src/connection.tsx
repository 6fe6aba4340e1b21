import type { ConnectionState } from './stream.js';

const END_REASONS: Record<string, string> = {
  runFinished: 'the run finished',
  idleTimeout: 'nothing new for a while (idle timeout)',
  maxDuration: 'the stream reached its time limit',
  maxBytes: 'the stream reached its size limit',
  shutdown: 'the server is shutting down',
  closed: 'the server closed the stream',
  tokenExpired: 'the token expired',
  runDeleted: 'the run was deleted',
};

/** A sentence for the state, as the run view shows it. */
export function describeConnection(state: ConnectionState): string {
  switch (state.phase) {
    case 'connecting':
      return 'Connecting…';
    case 'live':
      return 'Live';
    case 'reconnecting':
      return `Reconnecting in ${(state.delayMs / 1000).toFixed(1)} s (attempt ${state.attempt}): ${state.reason}`;
    case 'ended':
      // A run the server never heard of ends as finished once its grace is over, without a status.
      if (state.reason === 'runFinished' && state.status === undefined) {
        return 'Ended: no such run (nothing was ever written to it)';
      }
      return `Ended: ${END_REASONS[state.reason] ?? state.reason}`;
    case 'failed':
      return `Disconnected: ${state.error}`;
    case 'signedOut':
      return state.reason === 'tokenExpired'
        ? 'Paused: the token expired; sign in again to resume'
        : 'Paused: not signed in; sign in again to resume';
    case 'forbidden':
      return `Not allowed: ${state.error}`;
  }
}

/**
 * Whether a finished run's header may leave the connection unsaid: the stream is reading what
 * the run wrote or has ended with it. A failure, a pause for a sign-in or a refusal is still said.
 */
export function quietConnection(state: ConnectionState): boolean {
  return (
    state.phase === 'connecting' ||
    state.phase === 'live' ||
    (state.phase === 'ended' && state.reason === 'runFinished' && state.status !== undefined)
  );
}

/**
 * The connection state in words, announced politely to screen readers as it changes. After an
 * end that is not the run's own (or a failure) it offers to resume from the last entry seen; a
 * stream paused for a sign-in resumes by itself once the viewer signed in.
 */
export function ConnectionStateBadge({
  state,
  onResume,
}: {
  state: ConnectionState;
  onResume?: () => void;
}) {
  const resumable =
    state.phase === 'failed' || (state.phase === 'ended' && state.reason !== 'runFinished');
  return (
    <span className={`connection connection-${state.phase}`}>
      <span data-testid="connection-state" role="status">
        {describeConnection(state)}
      </span>
      {resumable && onResume ? (
        <button type="button" onClick={onResume}>
          Resume
        </button>
      ) : null}
    </span>
  );
}

/** The seed IcebergMonitor's three states: CONNECTING, CONNECTED, DISCONNECTED. */
export function seedStatus(state: ConnectionState): 'CONNECTING' | 'CONNECTED' | 'DISCONNECTED' {
  if (state.phase === 'live') return 'CONNECTED';
  if (state.phase === 'connecting' || state.phase === 'reconnecting') return 'CONNECTING';
  return 'DISCONNECTED';
}

/** The seed's "Connection Status: …" line, with the reason when there is one. */
export function SeedConnectionBadge({ state }: { state: ConnectionState }) {
  const status = seedStatus(state);
  const detail =
    state.phase === 'failed'
      ? state.error
      : state.phase === 'reconnecting'
        ? state.reason
        : state.phase === 'ended'
          ? (END_REASONS[state.reason] ?? state.reason)
          : state.phase === 'signedOut' || state.phase === 'forbidden'
            ? describeConnection(state)
            : null;
  return (
    <div data-testid="connection-status" className={`status status-${status.toLowerCase()}`}>
      Connection Status: <span>{status}</span>
      {detail ? <span className="status-error"> ({detail})</span> : null}
    </div>
  );
}
