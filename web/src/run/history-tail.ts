import type { TailFn, TailOptions } from '../stream.js';
import type { LineWanted, LogHistoryFn, RunTarget } from './log-history.js';

/** What the run view does with the history as it arrives. */
export interface HistoryHooks {
  /** Log text of the history, in order; `marked`: with entry marks (`log.txt?entries=true`). */
  onText(text: string, marked: boolean): void;
  /** The history could not be read whole: let go of its text, the stream brings the log. */
  onAbandon(): void;
  /** A line to show first: the history may begin near it (see LineWanted). */
  near?: LineWanted;
}

/**
 * A run's stream with its log history read first as text (docs/API.md, "Reading without
 * streaming"): the first time it is opened without a cursor it reads the history through
 * `history`, then streams with `logAfter` set to where the text ended, so the stream brings
 * every event from the start but only the log lines written after the text. That cursor is kept
 * for every later opening, with or without a cursor, so a reconnect neither loses the lines in
 * between nor reads the history again. Without a history (an error, an older server) it streams
 * as it always did, the log included.
 */
export function tailAfterHistory(
  tailFn: TailFn,
  history: LogHistoryFn,
  target: RunTarget,
  hooks: HistoryHooks,
): { tail: TailFn; startedOver(): void } {
  let textUpTo: string | null = null;
  let tried = false;
  const tail = (options: TailOptions) =>
    (async function* () {
      if (!tried && options.after === undefined && options.signal) {
        const signal = options.signal;
        const cursor = await history(target, hooks.onText, signal, hooks.near).catch(
          (error: unknown) => {
            if (signal.aborted) return null;
            // A network failure: the stream will say what is wrong, if anything still is.
            console.warn('The log history could not be read; streaming the whole log.', error);
            return null;
          },
        );
        if (signal.aborted) {
          // Unmounted or reopened midway: the next opening reads the history again from scratch.
          hooks.onAbandon();
          return;
        }
        tried = true;
        if (cursor === null) hooks.onAbandon();
        textUpTo = cursor;
      }
      yield* tailFn(textUpTo === null ? options : { ...options, logAfter: textUpTo });
    })();
  return {
    tail,
    /** After a `gap reset` the stream brings the whole log: the text read before is let go. */
    startedOver: () => {
      textUpTo = null;
    },
  };
}
