import { randomBytes } from 'node:crypto';
import { S3SegmentStore } from '../../src/store/s3-segments.js';

/** The S3-compatible server scripts/services.sh starts (s3rver), and its test bucket. */
export const S3_ENDPOINT = process.env['TAILWATER_TEST_S3'] ?? 'http://127.0.0.1:4569';
// s3rver's own credentials; the SDK reads them from the environment like any others.
process.env['AWS_ACCESS_KEY_ID'] ??= 'S3RVER';
process.env['AWS_SECRET_ACCESS_KEY'] ??= 'S3RVER';

/** A prefix of its own in the test bucket, so tests never see each other's objects. */
export function freshS3Url(): string {
  return `s3://tailwater-test/t-${randomBytes(6).toString('hex')}`;
}

export function s3Store(url: string): S3SegmentStore {
  return new S3SegmentStore({ url, endpoint: S3_ENDPOINT, region: 'us-east-1' });
}
