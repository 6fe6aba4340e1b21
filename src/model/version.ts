import { createRequire } from 'node:module';

/** This package's version, from the package.json it was installed with (src/ and dist/ alike). */
export const TAILWATER_VERSION = (
  createRequire(import.meta.url)('../../package.json') as { version: string }
).version;
