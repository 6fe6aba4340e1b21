import { randomBytes } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat } from 'node:fs/promises';
import { dirname, join, relative, sep } from 'node:path';

/**
 * Where sealed segments live (docs/STORAGE.md, "Sealed segments"): immutable objects, each
 * written once under a name, read by byte range, removed with their run. Guarantees every
 * implementation holds (segment-store.contract.ts):
 * - `put` resolves only once the object is durable and whole under its name; a reader never
 *   sees part of one, and a put interrupted by a crash leaves no object under the name.
 * - `read` answers exactly the bytes asked for, or fails when they are not all there.
 * - `remove` of a name that does not exist succeeds (removal is retried after a crash).
 */
export interface SegmentStore {
  /** What `tailwater stats` says of it: `dir:/path` or `s3://bucket/prefix`. */
  readonly description: string;
  put(name: string, data: Uint8Array): Promise<void>;
  /** `length` bytes from `offset`; a negative offset counts from the end (the trailer). */
  read(name: string, offset: number, length: number): Promise<Buffer>;
  size(name: string): Promise<number | undefined>;
  remove(name: string): Promise<void>;
  /** Objects under a prefix, up to 1000 after `after`, by name in code-point order. */
  list(prefix: string, after?: string): Promise<ListedSegment[]>;
  close(): Promise<void>;
}

export interface ListedSegment {
  name: string;
  /** When it was written (epoch ms). */
  modifiedAt: number;
}

/** A name's characters: what an object key and a file name both take as they are. */
const NAME = /^[A-Za-z0-9._-]+(\/[A-Za-z0-9._-]+)*$/;

export function checkSegmentName(name: string): void {
  if (!NAME.test(name) || name.split('/').some((part) => part === '.' || part === '..')) {
    throw new Error(`segment name "${name}" is not one this store makes`);
  }
}

/** A missing object, told apart from one that fails to read. */
export class SegmentMissing extends Error {}

/**
 * Segments as files under a directory (the embedded default: `<data>/segments`). A put writes
 * a temporary file beside the final one, fsyncs it, renames it into place and fsyncs the
 * directory, so after a crash the name holds the whole file or nothing.
 */
export class LocalSegmentStore implements SegmentStore {
  readonly description: string;

  constructor(private readonly root: string) {
    this.description = `dir:${root}`;
  }

  private path(name: string): string {
    checkSegmentName(name);
    return join(this.root, ...name.split('/'));
  }

  async put(name: string, data: Uint8Array): Promise<void> {
    const path = this.path(name);
    await mkdir(dirname(path), { recursive: true });
    const temporary = `${path}.${randomBytes(6).toString('hex')}.partial`;
    const file = await open(temporary, 'w');
    try {
      await file.writeFile(data);
      await file.sync();
    } finally {
      await file.close();
    }
    try {
      await rename(temporary, path);
    } catch (error) {
      await rm(temporary, { force: true });
      throw error;
    }
    const directory = await open(dirname(path), 'r');
    try {
      await directory.sync();
    } finally {
      await directory.close();
    }
  }

  async read(name: string, offset: number, length: number): Promise<Buffer> {
    let file;
    try {
      file = await open(this.path(name), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        throw new SegmentMissing(`segment ${name} is missing`);
      }
      throw error;
    }
    try {
      const start = offset < 0 ? (await file.stat()).size + offset : offset;
      const buffer = Buffer.allocUnsafe(length);
      let read = 0;
      while (read < length) {
        const { bytesRead } = await file.read(buffer, read, length - read, start + read);
        if (bytesRead === 0) break;
        read += bytesRead;
      }
      if (read < length || start < 0) {
        throw new SegmentMissing(`segment ${name} is shorter than it should be`);
      }
      return buffer;
    } finally {
      await file.close();
    }
  }

  async size(name: string): Promise<number | undefined> {
    try {
      return (await stat(this.path(name))).size;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  async remove(name: string): Promise<void> {
    await rm(this.path(name), { force: true });
  }

  async list(prefix: string, after = ''): Promise<ListedSegment[]> {
    const names: ListedSegment[] = [];
    const walk = async (directory: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(directory, { withFileTypes: true });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
        throw error;
      }
      for (const entry of entries) {
        const path = join(directory, entry.name);
        if (entry.isDirectory()) await walk(path);
        else {
          const name = relative(this.root, path).split(sep).join('/');
          names.push({ name, modifiedAt: (await stat(path)).mtimeMs });
        }
      }
    };
    await walk(this.root);
    return names
      .filter(({ name }) => name.startsWith(prefix) && name > after)
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
      .slice(0, 1000);
  }

  async close(): Promise<void> {}
}
