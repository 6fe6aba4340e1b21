import type { Entry } from '../../src/model/entry.js';
import type { TailEvent, TailFn, TailOptions } from '../src/stream.js';

/**
 * A stand-in for the SDK's tail(): the test pushes events, fails or ends the stream, and sees
 * the options each call was made with. Fakes the stream at the tail() boundary, not EventSource.
 */
export interface FakeTail {
  tail: TailFn;
  calls: TailOptions[];
  push(event: TailEvent): void;
  entry(entry: Partial<Entry> & { kind: string }): void;
  fail(error: Error): void;
  finish(): void;
}

export function fakeTail(): FakeTail {
  const queue: (TailEvent | { type: 'fail'; error: Error } | { type: 'finish' })[] = [];
  let wake: (() => void) | null = null;
  let seq = 0;
  const calls: TailOptions[] = [];
  const enqueue = (item: (typeof queue)[number]) => {
    queue.push(item);
    wake?.();
    wake = null;
  };
  return {
    calls,
    tail: (options) => {
      calls.push(options);
      return (async function* () {
        for (;;) {
          while (queue.length === 0) {
            if (options.signal?.aborted) return;
            await new Promise<void>((resolve) => {
              wake = resolve;
              options.signal?.addEventListener('abort', () => resolve(), { once: true });
            });
          }
          const item = queue.shift()!;
          if (item.type === 'fail') throw item.error;
          if (item.type === 'finish') return;
          yield item;
        }
      })();
    },
    push: enqueue,
    entry(partial) {
      seq += 1;
      const entry = {
        seq,
        time: new Date(Date.UTC(2026, 0, 1, 0, 0, seq)).toISOString(),
        ...partial,
      };
      enqueue({ type: 'entry', entry, json: JSON.stringify(entry), cursor: String(entry.seq) });
    },
    fail: (error) => enqueue({ type: 'fail', error }),
    finish: () => enqueue({ type: 'finish' }),
  };
}
