import { afterEach, describe, expect, it } from 'vitest';
import { Leadership } from '../../src/engine/leader.js';
import type { Lease, LeaseStore } from '../../src/store/lease.js';
import { LocalLeases } from '../../src/store/lease.js';
import { until } from '../helpers/wait.js';

// A task run on one server of a fleet at a time (docs/DEPLOYMENT.md, "One subscriber per
// fleet"). The leases of a shared store are in the replica store contract; here, what the
// holder and the others do with them.

const RETRY_MS = 20;

/** A task that records what it is told. */
function recorder() {
  const calls: string[] = [];
  let running = false;
  return {
    calls,
    get running() {
      return running;
    },
    start: () => {
      calls.push('start');
      running = true;
    },
    stop: async () => {
      calls.push('stop');
      running = false;
    },
  };
}

/** Leases whose holders can be made to lose them, as a dead connection would. */
class LosableLeases implements LeaseStore {
  private holder: { name: string; lose: () => void } | undefined;
  failing = false;

  async tryLease(name: string): Promise<Lease | undefined> {
    if (this.failing) throw new Error('store unavailable');
    if (this.holder) return undefined;
    let lose: () => void = () => {};
    const lost = new Promise<void>((resolve) => {
      lose = resolve;
    });
    const holder = { name, lose: () => {} };
    holder.lose = () => {
      if (this.holder === holder) this.holder = undefined;
      lose();
    };
    this.holder = holder;
    return {
      lost,
      release: async () => {
        if (this.holder === holder) this.holder = undefined;
      },
    };
  }

  loseHolder(): void {
    this.holder?.lose();
  }
}

const leaders: Leadership[] = [];
afterEach(async () => {
  for (const leader of leaders.splice(0)) await leader.stop();
});

function lead(store: LeaseStore, task: ReturnType<typeof recorder>, name = 'source:iceberg') {
  const leader = new Leadership(store, name, task, RETRY_MS);
  leaders.push(leader);
  leader.start();
  return leader;
}

describe('Leadership', () => {
  it('runs the task on one of two servers, and on the other once the first stops', async () => {
    const leases = new LocalLeases();
    const [a, b] = [recorder(), recorder()];
    const leaderA = lead(leases, a);
    await until(() => leaderA.leading, 'a leads');
    const leaderB = lead(leases, b);
    // Several of b's tries come and go while a holds the lease.
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS * 5));
    expect([a.running, b.running, leaderB.leading]).toEqual([true, false, false]);

    await leaderA.stop();
    expect(a.calls).toEqual(['start', 'stop']);
    await until(() => b.running, 'b takes over');
    expect(leaderB.leading).toBe(true);
  });

  it('stops the task the moment the lease is lost, and runs it again once it holds the lease again', async () => {
    const leases = new LosableLeases();
    const task = recorder();
    const leader = lead(leases, task);
    await until(() => task.running, 'started');
    leases.loseHolder();
    await until(() => task.calls.length >= 3, 'stopped and started again');
    expect(task.calls.slice(0, 3)).toEqual(['start', 'stop', 'start']);
    expect(leader.leading).toBe(true);
  });

  it('keeps trying while the store cannot be asked, and leads once it can', async () => {
    const leases = new LosableLeases();
    leases.failing = true;
    const task = recorder();
    const leader = lead(leases, task);
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS * 4));
    expect(task.calls).toEqual([]);
    leases.failing = false;
    await until(() => task.running, 'leads once the store answers');
    expect(leader.leading).toBe(true);
  });

  it('never starts the task after stop(), even with a try under way', async () => {
    const leases = new LocalLeases();
    const task = recorder();
    const leader = new Leadership(leases, 'retention', task, RETRY_MS);
    leader.start();
    await leader.stop();
    await new Promise((resolve) => setTimeout(resolve, RETRY_MS * 3));
    expect(task.running).toBe(false);
    // The lease was given back: another holder can take it.
    expect(await leases.tryLease('retention')).toBeDefined();
  });
});
