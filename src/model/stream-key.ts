/** What a stream is: one pipeline run, or a named topic. */
export type StreamKey =
  | { readonly type: 'run'; readonly pipeline: string; readonly runId: string }
  | { readonly type: 'topic'; readonly topic: string };

export function runKey(pipeline: string, runId: string): StreamKey {
  return { type: 'run', pipeline, runId };
}

export function topicKey(topic: string): StreamKey {
  return { type: 'topic', topic };
}

/**
 * A stable string for maps, the bus and the store. NUL cannot occur in a validated name, so
 * it separates the parts without ambiguity.
 */
export function streamId(key: StreamKey): string {
  return key.type === 'run'
    ? `run\u0000${key.pipeline}\u0000${key.runId}`
    : `topic\u0000${key.topic}`;
}

export function describeStream(key: StreamKey): string {
  return key.type === 'run' ? `run ${key.pipeline}/${key.runId}` : `topic ${key.topic}`;
}
