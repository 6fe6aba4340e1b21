export { backoffDelay } from '../model/backoff.js';
export type { BackoffOptions } from '../model/backoff.js';
export { TailwaterClientError } from './errors.js';
export { TailwaterClient } from './http-client.js';
export type {
  AppendEventsResult,
  AppendLogResult,
  ClientOptions,
  PipelineStats,
  SearchOptions,
  Target,
} from './http-client.js';
export type { SearchHit, SearchPage } from '../model/search-result.js';
export { Publisher } from './publisher.js';
export type { PublisherOptions, PublishOptions } from './publisher.js';
export { tail } from './tail.js';
export type { EndFrame, GapFrame, TailEvent, TailOptions } from './tail.js';
