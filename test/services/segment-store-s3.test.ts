import { describe, expect, it } from 'vitest';
import { parseS3Url } from '../../src/store/s3-segments.js';
import { freshS3Url, s3Store } from '../helpers/s3.js';
import { segmentStoreContract } from '../unit/segment-store.contract.js';

segmentStoreContract('S3 (s3rver)', async () => s3Store(freshS3Url()));

describe('S3 segment URLs', () => {
  it('takes a bucket and a prefix, and refuses what is not one', () => {
    expect(parseS3Url('s3://logs-bucket/tailwater/prod/')).toEqual({
      bucket: 'logs-bucket',
      prefix: 'tailwater/prod/',
    });
    expect(parseS3Url('s3://logs-bucket')).toEqual({ bucket: 'logs-bucket', prefix: '' });
    expect(() => parseS3Url('http://x/y')).toThrow(/not s3:\/\/bucket\/prefix/);
  });
});
