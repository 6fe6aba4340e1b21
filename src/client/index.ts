// The SDK: `tailwater/client` (package.json `exports`). It runs in Node.js 20 and in browsers
// alike, so it reaches only src/client and the pure parts of src/model: never the server's
// modules, nor a `node:` built-in (test/unit/client-bundle.test.ts checks; docs/SDK.md).
export { backoffDelay } from '../model/backoff.js';
export type { BackoffOptions } from '../model/backoff.js';
export { TailwaterClientError } from './errors.js';
export { runPath, TailwaterClient } from './http-client.js';
export type {
  AppendEventsResult,
  AppendLogResult,
  ClientOptions,
  PipelineStats,
  PipelinesPage,
  PipelinesPageOptions,
  RunsPage,
  RunsPageOptions,
  SearchOptions,
  Target,
} from './http-client.js';
export type { Entry, NewEvent } from '../model/entry.js';
export { formatBytes } from '../model/format.js';
export { isRunStatus, isTerminal, RUN_STATUSES } from '../model/run.js';
export type { PipelineSummary, Run, RunStatus, RunSummary } from '../model/run.js';
export type { SearchHit, SearchPage } from '../model/search-result.js';
export { Publisher } from './publisher.js';
export type { PublisherOptions, PublishOptions } from './publisher.js';
export { tail } from './tail.js';
export type { EndFrame, GapFrame, TailEvent, TailOptions } from './tail.js';
