import { describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { SealLoop } from '../../src/engine/seal-loop.js';

/** A sealer whose every pass waits `ms` (off the event loop, like the worker's compression). */
function backlog(ms: number) {
  const passes: number[] = [];
  return {
    passes,
    sealer: {
      pass: async () => {
        passes.push(performance.now());
        await sleep(ms);
        return { more: true };
      },
      sweep: async () => {},
    },
  };
}

/** Keeps the event loop about 80 % busy, as heavy ingest does, until the signal aborts. */
function busyLoop(signal: AbortSignal): void {
  const timer = setInterval(() => {
    const until = performance.now() + 8;
    while (performance.now() < until) {
      /* work the server would be doing */
    }
  }, 10);
  signal.addEventListener('abort', () => clearInterval(timer));
}

async function passesIn(ms: number, busy: boolean): Promise<number> {
  const { passes, sealer } = backlog(30);
  const loop = new SealLoop(sealer, { intervalSeconds: 60 });
  const done = new AbortController();
  if (busy) busyLoop(done.signal);
  loop.start();
  await sleep(ms);
  done.abort();
  await loop.stop();
  return passes.length;
}

describe('SealLoop', () => {
  it('seals a backlog at half the time of an idle server and a twentieth of a busy one', async () => {
    // Idle: passes of 30 ms alternate with 30 ms waits (~25 in 1.5 s). Busy: every 30 ms pass
    // waits 570 ms (3).
    const idle = await passesIn(1500, false);
    const busy = await passesIn(1500, true);
    expect(idle).toBeGreaterThanOrEqual(12);
    expect(busy).toBeLessThanOrEqual(4);
  });

  it('gives a long pass its idle share at once when the server turns idle (no wait of 19 × a long pass)', async () => {
    // A first pass of 300 ms while busy would wait 5.7 s; the server goes idle after 200 ms, so
    // the next pass starts once the wait is as long as the pass and the server was mostly idle.
    const { passes, sealer } = backlog(300);
    const loop = new SealLoop(sealer, { intervalSeconds: 60 });
    const busy = new AbortController();
    busyLoop(busy.signal);
    loop.start();
    await sleep(500);
    busy.abort();
    await sleep(2500);
    await loop.stop();
    expect(passes.length).toBeGreaterThanOrEqual(3);
  });

  it('waits the interval once nothing is left to seal, and stops between passes', async () => {
    let passes = 0;
    const loop = new SealLoop(
      {
        pass: async () => {
          passes += 1;
          return { more: false };
        },
        sweep: async () => {},
      },
      { intervalSeconds: 60 },
    );
    loop.start();
    await sleep(300);
    await loop.stop();
    expect(passes).toBe(1);
  });
});
