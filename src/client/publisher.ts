import type { NewEvent } from '../model/entry.js';
import { validateProducerKind } from '../model/names.js';
import type { BackoffOptions } from '../model/backoff.js';
import { backoffDelay, sleep } from '../model/backoff.js';
import { TailwaterClientError } from './errors.js';
import type { ClientOptions, Target } from './http-client.js';
import { TailwaterClient } from './http-client.js';
import { randomId, utf8Length } from './portable.js';

export interface PublisherOptions extends ClientOptions {
  target: Target;
  /** Events held while the server is slow or away; past it the oldest are dropped (4096). */
  queueSize?: number | undefined;
  /** Events per request (64). */
  batchSize?: number | undefined;
  /** The largest `data`, encoded, accepted locally (64 KiB, the server's limit). */
  maxEventBytes?: number | undefined;
  backoff?: BackoffOptions | undefined;
  /** Told of each failed send (it is retried) and of each batch the server refused (dropped). */
  onError?: ((error: TailwaterClientError) => void) | undefined;
}

export interface PublishOptions {
  step?: string | undefined;
  correlationId?: string | undefined;
}

/**
 * Publishes events from a producer's own code without ever blocking it (ZenML's publisher,
 * done better). `publish()` only queues; a background loop sends batches in order. A failed send
 * is retried with capped exponential backoff, and every event carries a producer id, so a retry
 * whose first attempt did reach the server is not stored twice. When the queue is full the
 * oldest event is dropped and counted. A 501 from the server disables the publisher.
 */
export class Publisher {
  /** Events dropped because the queue was full, or because the server refused their batch. */
  dropped = 0;
  /** Events the server acknowledged (duplicates of a retry included once). */
  sent = 0;
  /** True after the server answered 501: publish() then does nothing. */
  disabled = false;

  private readonly client: TailwaterClient;
  private readonly queue: NewEvent[] = [];
  private inFlight = 0;
  private pumping: Promise<void> | undefined;
  private readonly idPrefix = randomId();
  private counter = 0;
  private readonly queueSize: number;
  private readonly batchSize: number;
  private readonly maxEventBytes: number;
  private closed = false;
  private readonly stop = new AbortController();
  private idleWaiters: Array<() => void> = [];

  constructor(private readonly options: PublisherOptions) {
    this.client = new TailwaterClient(options);
    this.queueSize = options.queueSize ?? 4096;
    this.batchSize = options.batchSize ?? 64;
    this.maxEventBytes = options.maxEventBytes ?? 64 * 1024;
  }

  /** Events waiting to be sent, or being sent. */
  get pending(): number {
    return this.queue.length + this.inFlight;
  }

  /**
   * Queues an event and returns at once. A reserved or malformed kind, or data over the size
   * limit, throws here rather than costing a round trip.
   */
  publish(kind: string, data: unknown, options: PublishOptions = {}): void {
    validateProducerKind(kind);
    const size = utf8Length(JSON.stringify(data ?? null));
    if (size > this.maxEventBytes) {
      throw new RangeError(`Event data exceeds ${this.maxEventBytes} bytes (was ${size}).`);
    }
    if (this.disabled || this.closed) return;
    this.counter += 1;
    this.queue.push({
      kind,
      data,
      step: options.step,
      correlationId: options.correlationId,
      id: `${this.idPrefix}-${this.counter}`,
    });
    if (this.queue.length > this.queueSize) {
      this.queue.shift();
      this.dropped += 1;
    }
    this.startPump();
  }

  private startPump(): void {
    this.pumping ??= this.pump().finally(() => {
      this.pumping = undefined;
      // An event published after the loop saw an empty queue, but before this callback ran,
      // would otherwise wait for the next publish(): start again for it.
      if (this.queue.length > 0 && !this.disabled && !this.stop.signal.aborted) {
        this.startPump();
      } else if (this.pending === 0) {
        for (const wake of this.idleWaiters.splice(0)) wake();
      }
    });
  }

  /**
   * Resolves true once nothing is pending — everything queued was acknowledged, or dropped and
   * counted in `dropped` — and false if `timeoutMs` passed first. It does not stop sending.
   */
  flush(timeoutMs: number): Promise<boolean> {
    if (this.pending === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.idleWaiters = this.idleWaiters.filter((wake) => wake !== done);
        resolve(false);
      }, timeoutMs);
      const done = () => {
        clearTimeout(timer);
        resolve(true);
      };
      this.idleWaiters.push(done);
    });
  }

  /**
   * Flushes for up to `timeoutMs`, then stops sending; returns whether all was delivered. What
   * was still queued is counted in `dropped`.
   */
  async close(timeoutMs = 5000): Promise<boolean> {
    const flushed = await this.flush(timeoutMs);
    this.closed = true;
    this.stop.abort();
    this.dropped += this.queue.length;
    this.queue.length = 0;
    return flushed;
  }

  private async pump(): Promise<void> {
    let failures = 0;
    while (this.queue.length > 0 && !this.disabled && !this.stop.signal.aborted) {
      const batch = this.queue.splice(0, this.batchSize);
      this.inFlight = batch.length;
      // The same batch, with the same ids, until the server takes it or refuses it.
      for (;;) {
        try {
          await this.client.appendEvents(this.options.target, batch);
          this.sent += batch.length;
          failures = 0;
          break;
        } catch (error) {
          const clientError =
            error instanceof TailwaterClientError
              ? error
              : new TailwaterClientError(String(error), 0);
          this.options.onError?.(clientError);
          if (clientError.status === 501) {
            this.disabled = true;
            this.dropped += batch.length + this.queue.length;
            this.queue.length = 0;
            break;
          }
          if (!clientError.retryable) {
            this.dropped += batch.length;
            break;
          }
          failures += 1;
          const wait = clientError.retryAfter
            ? clientError.retryAfter * 1000
            : backoffDelay(failures - 1, this.options.backoff);
          await sleep(wait, this.stop.signal);
          if (this.stop.signal.aborted) {
            this.dropped += batch.length;
            break;
          }
        }
      }
      this.inFlight = 0;
    }
  }
}
