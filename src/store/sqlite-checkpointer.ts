import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Copies the WAL's committed pages back into the database file on a thread of its own.
 *
 * SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past 1000 pages: after
 * a full batch that is 65 MB copied (and synced) while the event loop waits, about 200 ms. So
 * the writing connection turns it off, and this worker, with a connection of its own, runs
 * PASSIVE checkpoints, which wait for no one and make no one wait: readers and the writer go on
 * meanwhile. It is asked to once a few megabytes were committed, and at least every second while
 * anything was. A checkpoint is housekeeping, not durability: a commit is durable in the WAL.
 */
export class WalCheckpointer {
  private readonly worker: Worker;
  private running = false;
  private again = false;
  private failed = false;
  private unwritten = 0;
  private readonly timer: NodeJS.Timeout;

  /** `onFailure` is told once if the worker cannot run: the caller checkpoints as SQLite would. */
  constructor(path: string, onFailure: (error: Error) => void) {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { path, driver: createRequire(import.meta.url).resolve('better-sqlite3') },
    });
    this.worker.unref();
    this.worker.on('message', () => {
      this.running = false;
      if (this.again) {
        this.again = false;
        this.run();
      }
    });
    this.worker.on('error', (error) => {
      if (this.failed) return;
      this.failed = true;
      onFailure(error);
    });
    this.timer = setInterval(() => {
      if (this.unwritten > 0) this.run();
    }, 1000);
    this.timer.unref();
  }

  /** A commit of about `bytes` landed in the WAL. */
  committed(bytes: number): void {
    this.unwritten += bytes;
    if (this.unwritten >= CHECKPOINT_AFTER_BYTES) this.run();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.worker.terminate();
  }

  private run(): void {
    if (this.failed) return;
    this.unwritten = 0;
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = true;
    this.worker.postMessage('checkpoint');
  }
}

/** About SQLite's own threshold (1000 pages of 4 KiB). */
const CHECKPOINT_AFTER_BYTES = 4 * 1024 * 1024;

// Plain JavaScript, run as the worker's own script: the package ships no separate file for it,
// and `eval` workers resolve nothing relative to this module, hence the driver's resolved path.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 5000');
parentPort.on('message', () => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch {
    // Busy or interrupted: the next request tries again; the WAL holds every commit meanwhile.
  }
  parentPort.postMessage('done');
});
`;
