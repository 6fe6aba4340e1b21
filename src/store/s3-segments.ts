import {
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import type { ListedSegment, SegmentStore } from './segment-store.js';
import { SegmentMissing, checkSegmentName } from './segment-store.js';

/**
 * Segments as objects in S3 or any S3-compatible storage (docs/STORAGE.md), under a prefix of a
 * bucket. A PUT is whole or absent, so a crash mid-upload leaves nothing under the name; reads
 * are range GETs (a block, or the trailer and footer from the end). Credentials come from the
 * AWS SDK's usual chain (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile, an instance role).
 */
export interface S3SegmentOptions {
  /** `s3://bucket/prefix`. */
  url: string;
  endpoint?: string | undefined;
  region: string;
}

export function parseS3Url(url: string): { bucket: string; prefix: string } {
  const match = /^s3:\/\/([a-z0-9][a-z0-9.-]{1,61}[a-z0-9])(?:\/(.*))?$/.exec(url);
  if (!match) throw new Error(`segments: "${url}" is not s3://bucket/prefix`);
  const prefix = (match[2] ?? '').replace(/\/+$/, '');
  return { bucket: match[1]!, prefix: prefix === '' ? '' : `${prefix}/` };
}

function isNotFound(error: unknown): boolean {
  const e = error as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === 'NoSuchKey' || e.name === 'NotFound' || e.$metadata?.httpStatusCode === 404;
}

export class S3SegmentStore implements SegmentStore {
  readonly description: string;
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly prefix: string;
  /** Sizes of objects read from the end (segments are immutable). */
  private readonly sizes = new Map<string, number>();

  constructor(options: S3SegmentOptions) {
    const { bucket, prefix } = parseS3Url(options.url);
    this.bucket = bucket;
    this.prefix = prefix;
    this.description = options.url;
    this.client = new S3Client({
      region: options.region,
      ...(options.endpoint ? { endpoint: options.endpoint, forcePathStyle: true } : {}),
    });
  }

  private key(name: string): string {
    checkSegmentName(name);
    return this.prefix + name;
  }

  async put(name: string, data: Uint8Array): Promise<void> {
    await this.client.send(
      new PutObjectCommand({
        Bucket: this.bucket,
        Key: this.key(name),
        Body: data,
        ContentLength: data.byteLength,
        ContentType: 'application/octet-stream',
      }),
    );
  }

  async read(name: string, offset: number, length: number): Promise<Buffer> {
    if (length === 0) return Buffer.alloc(0);
    // A read from the end asks the size first (once: objects never change): not every
    // S3-compatible server takes suffix ranges (`bytes=-16`).
    let start = offset;
    if (offset < 0) {
      const size = this.sizes.get(name) ?? (await this.size(name));
      if (size === undefined) throw new SegmentMissing(`segment ${name} is missing`);
      this.sizes.set(name, size);
      if (this.sizes.size > 10_000) this.sizes.delete(this.sizes.keys().next().value!);
      start = size + offset;
      if (start < 0) throw new SegmentMissing(`segment ${name} is shorter than it should be`);
    }
    const range = `bytes=${start}-${start + length - 1}`;
    let bytes: Uint8Array;
    try {
      const answer = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.key(name), Range: range }),
      );
      bytes = await answer.Body!.transformToByteArray();
    } catch (error) {
      if (isNotFound(error)) throw new SegmentMissing(`segment ${name} is missing`);
      throw error;
    }
    const buffer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (buffer.length !== length) {
      throw new SegmentMissing(`segment ${name} is shorter than it should be`);
    }
    return buffer;
  }

  async size(name: string): Promise<number | undefined> {
    try {
      const head = await this.client.send(
        new HeadObjectCommand({ Bucket: this.bucket, Key: this.key(name) }),
      );
      return head.ContentLength;
    } catch (error) {
      if (isNotFound(error)) return undefined;
      throw error;
    }
  }

  async remove(name: string): Promise<void> {
    this.sizes.delete(name);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.key(name) }));
  }

  async list(prefix: string, after = ''): Promise<ListedSegment[]> {
    const answer = await this.client.send(
      new ListObjectsV2Command({
        Bucket: this.bucket,
        Prefix: this.prefix + prefix,
        StartAfter: after === '' ? undefined : this.prefix + after,
        MaxKeys: 1000,
      }),
    );
    return (answer.Contents ?? []).map((object) => ({
      name: object.Key!.slice(this.prefix.length),
      modifiedAt: object.LastModified?.getTime() ?? 0,
    }));
  }

  async close(): Promise<void> {
    this.client.destroy();
  }
}
