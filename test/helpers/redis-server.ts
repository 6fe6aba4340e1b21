import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './net.js';
import { stopChild } from './stop-child.js';

/** The Redis that scripts/services.sh starts (docs/SERVICES.md). */
export const SHARED_REDIS_URL = 'redis://127.0.0.1:6379';

const run = promisify(execFile);

async function pong(port: number): Promise<boolean> {
  try {
    const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), 'ping'], {
      timeout: 2000,
    });
    return stdout.trim() === 'PONG';
  } catch {
    return false;
  }
}

/**
 * A Redis of a test's own, on a free loopback port with its own directory and no persistence,
 * that the test may stop and start again without touching the shared one on 6379.
 */
export class PrivateRedis {
  readonly dir = mkdtempSync(join(tmpdir(), 'tailwater-redis-'));
  private child: ChildProcess | undefined;

  private constructor(readonly port: number) {}

  static async start(): Promise<PrivateRedis> {
    if (!existsSync('/usr/bin/redis-server')) {
      throw new Error('redis-server is not installed: run scripts/services.sh (docs/SERVICES.md)');
    }
    const redis = new PrivateRedis(await freePort());
    await redis.start();
    return redis;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  /** Starts redis-server (unless it runs) and waits (10 s at most) until it answers PONG. */
  async start(): Promise<void> {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return;
    const child = spawn(
      '/usr/bin/redis-server',
      [
        ...['--bind', '127.0.0.1', '--port', String(this.port), '--daemonize', 'no'],
        ...['--save', '', '--appendonly', 'no', '--dir', this.dir],
        ...['--logfile', join(this.dir, 'redis.log')],
      ],
      { stdio: 'ignore' },
    );
    this.child = child;
    const deadline = Date.now() + 10_000;
    while (!(await pong(this.port))) {
      if (Date.now() > deadline || child.exitCode !== null) {
        throw new Error(`redis-server on ${this.port} did not answer PONG:\n${this.log()}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** `redis-cli shutdown nosave`, then waits (10 s at most) for the process to exit. */
  async stop(): Promise<void> {
    const child = this.child;
    if (!child) return;
    const shutdown = () =>
      run('redis-cli', ['-h', '127.0.0.1', '-p', String(this.port), 'shutdown', 'nosave'], {
        timeout: 5000,
      }).catch(() => undefined);
    await stopChild(child, shutdown, 10_000);
  }

  log(): string {
    const path = join(this.dir, 'redis.log');
    return existsSync(path) ? readFileSync(path, 'utf8').split('\n').slice(-40).join('\n') : '';
  }

  async dispose(): Promise<void> {
    await this.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
