import { Worker } from 'node:worker_threads';
import type { TransferListItem } from 'node:worker_threads';

type Pending = { resolve: (out: unknown) => void; reject: (error: Error) => void };

/**
 * One worker thread running `source` (a CommonJS program, run with `eval` so it needs no file of
 * its own: the same code then works from the TypeScript sources and the built package). The
 * program answers each `[id, ...args]` with `[id, result, null]` or `[id, null, message]`, in
 * the order asked. Started on first use; idle, it does not keep the process alive.
 */
export class EvalWorker {
  private worker: Worker | undefined;
  private next = 0;
  private readonly pending = new Map<number, Pending>();

  constructor(
    private readonly name: string,
    private readonly source: string,
    private readonly workerData: unknown,
  ) {}

  call<T>(args: readonly unknown[], transfer: readonly TransferListItem[] = []): Promise<T> {
    const worker = this.start();
    const id = this.next++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (out: unknown) => void, reject });
      if (this.pending.size === 1) worker.ref();
      worker.postMessage([id, ...args], transfer);
    });
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = undefined;
    if (worker) await worker.terminate();
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(this.source, { eval: true, workerData: this.workerData });
    worker.on('message', ([id, out, error]: [number, unknown, string | null]) => {
      const waiting = this.pending.get(id);
      this.pending.delete(id);
      if (this.pending.size === 0) worker.unref();
      if (!waiting) return;
      if (error === null) waiting.resolve(out);
      else waiting.reject(new Error(`${this.name}: ${error}`));
    });
    worker.on('error', (error) => this.failAll(error));
    worker.on('exit', () => {
      if (this.worker === worker) this.worker = undefined;
      this.failAll(new Error(`${this.name}: the worker stopped`));
    });
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private failAll(error: Error): void {
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}
