import type { RunStatus } from './run.js';

/** What `GET /api/v1/search` answers (docs/SEARCH.md): the SDK's and the server's one shape. */
export interface SearchHit {
  pipeline: string;
  runId: string;
  runStatus: RunStatus;
  runCreatedAt: string;
  kind: 'log' | 'event';
  /** The entry the line starts in (log), or the event's seq. */
  seq: number;
  /** For log text: the 1-based line number and the byte offset of the line in the log. */
  line: number | null;
  offset: number | null;
  text: string;
  textStart: number;
  truncated: boolean;
  matches: Array<[number, number]>;
}

export interface SearchPage {
  hits: SearchHit[];
  /** Absent when the search has nothing more to give. */
  next?: string | undefined;
  /** How far the index is behind what is stored: what was written since is not found yet. */
  index: { pendingEntries: number; lagSeconds: number };
}
