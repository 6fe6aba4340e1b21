import { describe, expect, it } from 'vitest';
import { setTimeout as sleep } from 'node:timers/promises';
import { eventLoopGauge, SealLoop } from '../../src/engine/seal-loop.js';
import type { LoadGauge } from '../../src/engine/seal-loop.js';

/** A sealer whose every pass waits `ms` (off the event loop, like the worker's compression). */
function backlog(ms: number) {
  const passes: number[] = [];
  let sealing = 0;
  return {
    passes,
    /** The share of the time from the first pass's start to the last one's end spent in passes. */
    share: () => sealing / (performance.now() - passes[0]!),
    sealer: {
      pass: async () => {
        const started = performance.now();
        passes.push(started);
        await sleep(ms);
        sealing += performance.now() - started;
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

/**
 * A server as busy as `load()` says at each reading: the pacing is checked against a load the
 * test sets, so other work on the machine (or in this process) cannot make an idle server look
 * busy.
 */
const gaugeOf =
  (load: () => number): LoadGauge =>
  () =>
    load;

/** The share of the time a backlog of 30 ms passes took over `ms`, at a steady load. */
async function shareIn(ms: number, utilization: number): Promise<number> {
  const { share, sealer } = backlog(30);
  const loop = new SealLoop(sealer, { intervalSeconds: 60, gauge: gaugeOf(() => utilization) });
  loop.start();
  await sleep(ms);
  await loop.stop();
  return share();
}

describe('SealLoop', () => {
  it('seals a backlog at half the time of an idle server and a twentieth of a busy one', async () => {
    // Each wait follows how long the pass took, so the shares hold however late timers fire on
    // a loaded machine (there, fewer passes fit in the time, at the same share). Busy: one 30 ms
    // pass, then a 570 ms wait, then the second pass: 60 of 630 ms at most.
    const idle = await shareIn(1500, 0.1);
    const busy = await shareIn(1500, 0.8);
    // Timers that fire late lengthen the waits, so the idle share is only bounded above, and
    // kept well apart from the busy one.
    expect(idle).toBeLessThanOrEqual(0.55);
    expect(busy).toBeLessThan(0.12);
    expect(idle).toBeGreaterThan(3 * busy);
  });

  it('gives a long pass its idle share at once when the server turns idle (no wait of 19 × a long pass)', async () => {
    // A first pass of 300 ms while busy would wait 5.7 s; the server goes idle after 500 ms, so
    // the next pass starts once the wait is as long as the pass and the server was mostly idle.
    const { passes, sealer } = backlog(300);
    let utilization = 0.8;
    const loop = new SealLoop(sealer, { intervalSeconds: 60, gauge: gaugeOf(() => utilization) });
    loop.start();
    await sleep(500);
    utilization = 0.1;
    await sleep(2500);
    await loop.stop();
    expect(passes.length).toBeGreaterThanOrEqual(3);
  });

  it('takes a server whose event loop is busy as busy, and a quiet one as idle (the default gauge)', async () => {
    const quiet = eventLoopGauge();
    await sleep(300);
    expect(quiet()).toBeLessThan(0.5);
    const busy = new AbortController();
    const reading = eventLoopGauge();
    busyLoop(busy.signal);
    await sleep(300);
    busy.abort();
    expect(reading()).toBeGreaterThan(0.5);
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
