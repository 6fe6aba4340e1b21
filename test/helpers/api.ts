import { expect } from 'vitest';
import type { Entry } from '../../src/model/entry.js';
import type { Run } from '../../src/model/run.js';

// Calls to the HTTP API as a producer or a viewer makes them, against a test server.

/** Where to send: a base URL, or anything that has one (a TestApp, a ServerProcess). */
export type Server = string | { readonly url: string };

const baseOf = (server: Server): string => (typeof server === 'string' ? server : server.url);
const withQuery = (path: string, query: string): string => (query ? `${path}?${query}` : path);

/** `/api/v1/pipelines/<pipeline>/runs/<runId>`, both parts URL-encoded. */
export const runPath = (pipeline: string, runId: string): string =>
  `/api/v1/pipelines/${encodeURIComponent(pipeline)}/runs/${encodeURIComponent(runId)}`;

/** A run's native SSE stream, with an optional query string (without its `?`). */
export const runStreamPath = (pipeline: string, runId: string, query = ''): string =>
  withQuery(`${runPath(pipeline, runId)}/stream`, query);

/** A topic's native SSE stream, with an optional query string (without its `?`). */
export const topicStreamPath = (topic: string, query = ''): string =>
  withQuery(`/api/v1/topics/${encodeURIComponent(topic)}/stream`, query);

/** A request with an optional JSON body; the response as it came (its status not checked). */
export function send(server: Server, method: string, path: string, body?: unknown) {
  return fetch(`${baseOf(server)}${path}`, {
    method,
    headers: body === undefined ? {} : { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

export interface HttpAnswer {
  status: number;
  headers: Headers;
  text: string;
}

/** As `send`, with the body read as text. */
export async function http(
  server: Server,
  method: string,
  path: string,
  body?: unknown,
): Promise<HttpAnswer> {
  const response = await send(server, method, path, body);
  return { status: response.status, headers: response.headers, text: await response.text() };
}

/** As `send`, with the body parsed as JSON. */
export async function httpJson(server: Server, method: string, path: string, body?: unknown) {
  const response = await send(server, method, path, body);
  return { status: response.status, headers: response.headers, body: await response.json() };
}

/** PUTs `{status}` to a run (creating it); the response as it came. */
export function sendStatus(server: Server, run: string, status: string) {
  return send(server, 'PUT', run, { status });
}

/** PUTs `{status}` to a run (creating it), expecting 200; answers the run. */
export async function putStatus(server: Server, run: string, status: string): Promise<Run> {
  const answer = await http(server, 'PUT', run, { status });
  expect(answer.status).toBe(200);
  return JSON.parse(answer.text) as Run;
}

/** POSTs log text (text/plain) to a run, as a producer would; the response as it came. */
export function sendLog(server: Server, run: string, text: string) {
  return fetch(`${baseOf(server)}${run}/logs`, {
    method: 'POST',
    headers: { 'content-type': 'text/plain; charset=utf-8' },
    body: text,
  });
}

/** As `sendLog`, expecting 200; answers the append. */
export async function postLog(server: Server, run: string, text: string) {
  const answer = await sendLog(server, run, text);
  expect(answer.status).toBe(200);
  return (await answer.json()) as { seq: number };
}

/** POSTs `{events}` to a run or topic (`<path>/events`); the response as it came. */
export function sendEvents(server: Server, path: string, events: readonly unknown[]) {
  return send(server, 'POST', `${path}/events`, { events });
}

/**
 * Every entry of a run or topic, read page by page from `<path>/entries` (each page expected
 * 200), with an optional extra query such as `kinds=log`.
 */
export async function readAllEntries(server: Server, path: string, query = ''): Promise<Entry[]> {
  const all: Entry[] = [];
  let after = 0;
  for (let page = 0; page < 1000; page += 1) {
    const res = await fetch(
      `${baseOf(server)}${path}/entries?after=${after}&limit=1000${query ? `&${query}` : ''}`,
    );
    expect(res.status).toBe(200);
    const body = (await res.json()) as { entries: Entry[]; next: number; hasMore: boolean };
    all.push(...body.entries);
    if (!body.hasMore) return all;
    after = body.next;
  }
  throw new Error('more than 1000 pages of entries');
}
