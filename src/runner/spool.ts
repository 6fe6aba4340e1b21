import { appendFileSync, mkdirSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { RunStatus } from '../model/run.js';
import { backoffDelay, sleep } from '../model/backoff.js';
import type { TailwaterClient } from '../client/http-client.js';
import { TailwaterClientError } from '../client/errors.js';

export type SpoolItem =
  | { type: 'log'; id: string; text: string; step?: string | undefined }
  | { type: 'status'; status: RunStatus };

export function defaultSpoolDir(): string {
  return process.env['TAILWATER_SPOOL_DIR'] ?? join(homedir(), '.tailwater', 'spool');
}

/**
 * The runner's outbox. Every chunk is written to a file on disk before it is sent, then sent in
 * order, one at a time, until the server acknowledges it. A server that is down or restarting
 * only delays delivery: the spool retries with capped backoff, and each log chunk carries a
 * producer id, so a chunk whose acknowledgement was lost is not stored twice on retry.
 */
export class Spool {
  private readonly items: SpoolItem[] = [];
  private readonly file: string;
  private sending: Promise<void> | undefined;
  private idleWaiters: Array<() => void> = [];
  /** Consecutive failed sends (0 while the server answers). */
  failures = 0;
  lastError: string | undefined;

  constructor(
    private readonly client: TailwaterClient,
    private readonly pipeline: string,
    private readonly runId: string,
    name: string,
    dir = defaultSpoolDir(),
    private readonly onRetry: (message: string) => void = () => {},
  ) {
    mkdirSync(dir, { recursive: true });
    this.file = join(dir, `${name}.jsonl`);
  }

  get pending(): number {
    return this.items.length;
  }

  push(item: SpoolItem): void {
    appendFileSync(this.file, `${JSON.stringify(item)}\n`);
    this.items.push(item);
    this.sending ??= this.send().finally(() => {
      this.sending = undefined;
      for (const wake of this.idleWaiters.splice(0)) wake();
    });
  }

  /** Resolves once everything pushed so far has been delivered. */
  drained(): Promise<void> {
    if (!this.sending) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Removes the file once everything was delivered. */
  discard(): void {
    if (this.items.length === 0) rmSync(this.file, { force: true });
  }

  private async send(): Promise<void> {
    while (this.items.length > 0) {
      const item = this.items[0]!;
      try {
        if (item.type === 'log') {
          await this.client.appendLog(this.pipeline, this.runId, item.text, {
            id: item.id,
            step: item.step,
          });
        } else {
          await this.client.setStatus(this.pipeline, this.runId, item.status);
        }
        this.items.shift();
        this.failures = 0;
      } catch (error) {
        const clientError =
          error instanceof TailwaterClientError
            ? error
            : new TailwaterClientError(String(error), 0);
        if (!clientError.retryable) {
          // The server refused it for good (e.g. the run was ended elsewhere): say so, move on.
          this.onRetry(`tailwater: the server refused ${item.type}: ${clientError.message}`);
          this.items.shift();
          continue;
        }
        this.failures += 1;
        this.lastError = clientError.message;
        const wait = clientError.retryAfter
          ? clientError.retryAfter * 1000
          : backoffDelay(this.failures - 1, { initialMs: 200, maxMs: 5000 });
        if (this.failures === 1 || this.failures % 10 === 0) {
          this.onRetry(
            `tailwater: ${clientError.message}; output is kept on disk and will be sent when the server is back`,
          );
        }
        await sleep(wait);
      }
    }
  }
}
