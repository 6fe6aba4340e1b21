import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Copies the WAL's committed pages back into the database file on a thread of its own.
 *
 * SQLite's automatic checkpoint runs inside the COMMIT that takes the WAL past 1000 pages: after
 * a full batch that is 65 MB copied (and synced) while the event loop waits, about 200 ms. So
 * the writing connection turns it off, and this worker, with a connection of its own, runs
 * PASSIVE checkpoints as often as SQLite would (every ~250 commits or 4 MB), alongside the
 * writes: they wait for no one and make no one wait.
 *
 * But the WAL starts over only when a write begins with all of it copied back, which a writer
 * that keeps writing never allows: it would grow without end (a gigabyte in four seconds of
 * small appends). So once the file passes WAL_RESTART_BYTES, one checkpoint runs as a turn of the
 * store's write queue: the writes wait for it (asynchronously), it copies what the last ones
 * left, and the next write starts the WAL over.
 */
export class WalCheckpointer {
  private readonly worker: Worker;
  private failed = false;
  private commits = 0;
  private bytes = 0;
  private waiting: (() => void) | undefined;
  private running: Promise<void> | undefined;
  private following: Promise<void> | undefined;
  /** What the last checkpoint found in the WAL, and how many bytes had been committed when it began. */
  private walBytes = 0;
  private committedAtReport = 0;
  private committedAtBegin = 0;
  /** Every byte committed since the store opened. */
  private committedTotal = 0;

  /** `onFailure` is told once if the worker cannot run: the caller checkpoints as SQLite would. */
  constructor(path: string, onFailure: (error: Error) => void) {
    this.worker = new Worker(WORKER_SOURCE, {
      eval: true,
      workerData: { path, driver: createRequire(import.meta.url).resolve('better-sqlite3') },
    });
    this.worker.unref();
    // Each checkpoint reports how much the WAL holds (frames × page size).
    this.worker.on('message', (walBytes: number) => {
      this.walBytes = walBytes;
      this.committedAtReport = this.committedAtBegin;
      this.finished();
    });
    this.worker.on('error', (error) => {
      if (this.failed) return;
      this.failed = true;
      this.finished();
      onFailure(error);
    });
  }

  /** A commit of about `bytes` landed in the WAL; starts a checkpoint when one is due. */
  committed(bytes: number): void {
    this.commits += 1;
    this.bytes += bytes;
    this.committedTotal += bytes;
    if (this.commits >= CHECKPOINT_COMMITS || this.bytes >= CHECKPOINT_BYTES) void this.run();
  }

  /** Whether anything was committed since the last checkpoint began. */
  get pending(): boolean {
    return !this.failed && this.commits > 0;
  }

  /**
   * Whether the WAL has grown so long that it must start over (see the class comment): what the
   * last checkpoint found in it plus what was committed since that checkpoint began. A checkpoint
   * takes a while to report, and a writer that keeps writing adds to the WAL meanwhile; without
   * the second term the WAL would pass the bound by whatever lands while a checkpoint runs.
   */
  get mustRestart(): boolean {
    const estimate = this.walBytes + (this.committedTotal - this.committedAtReport);
    return !this.failed && estimate > WAL_RESTART_BYTES;
  }

  /**
   * A checkpoint ran as a turn of the write queue, so the next write starts the WAL over. If a
   * reader kept it from copying everything, the next checkpoint's report says so.
   */
  restarted(): void {
    this.walBytes = 0;
    this.committedAtReport = this.committedTotal;
  }

  /**
   * Runs a checkpoint that copies every commit made before this call; resolves when it is done
   * (or the worker failed). A checkpoint already running began before the latest commits, so
   * joining it would leave them in the WAL until some later commit: one more follows it instead,
   * shared by every call made meanwhile.
   */
  run(): Promise<void> {
    if (this.failed) return Promise.resolve();
    if (this.running) {
      this.following ??= this.running.then(() => {
        this.following = undefined;
        return this.run();
      });
      return this.following;
    }
    this.commits = 0;
    this.bytes = 0;
    this.committedAtBegin = this.committedTotal;
    this.running = new Promise<void>((resolve) => {
      this.waiting = resolve;
      this.worker.postMessage('checkpoint');
    }).finally(() => {
      this.running = undefined;
    });
    return this.running;
  }

  async close(): Promise<void> {
    this.finished();
    await this.worker.terminate();
  }

  private finished(): void {
    const resolve = this.waiting;
    this.waiting = undefined;
    resolve?.();
  }
}

/** About SQLite's own threshold of 1000 pages: a small commit writes a few. */
const CHECKPOINT_COMMITS = 250;
const CHECKPOINT_BYTES = 4 * 1024 * 1024;
/** Past this, the WAL is made to start over. */
const WAL_RESTART_BYTES = 64 * 1024 * 1024;

// Plain JavaScript, run as the worker's own script: the package ships no separate file for it,
// and `eval` workers resolve nothing relative to this module, hence the driver's resolved path.
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 5000');
const pageSize = db.pragma('page_size', { simple: true });
parentPort.on('message', () => {
  let walBytes = 0;
  try {
    const [result] = db.pragma('wal_checkpoint(PASSIVE)');
    walBytes = result.log * pageSize;
  } catch {
    // Busy or interrupted: the next one tries again; the WAL holds every commit meanwhile.
  }
  parentPort.postMessage(walBytes);
});
`;
