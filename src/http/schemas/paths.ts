import { z } from 'zod';
import { validateRunId } from '../../model/names.js';
import { pipelineParam, queryParam, topicParam } from '../params.js';

/**
 * The path parameters of the native routes. Each wraps the check its handler makes of it
 * (params.ts, model/names.ts), so the schema and the handler refuse the same names with the
 * same errors; the handlers still make those checks themselves, in their turn (a name before
 * its run is looked up, before its query and its body: docs/API.md).
 */

const NAME_RULE =
  '1–256 bytes of UTF-8, no control characters or bidirectional overrides, taken in NFC; ' +
  'percent-encode it (`%2F` for `/`).';

const path = (name: string, check: (value: string) => string, description: string) =>
  queryParam(
    name,
    (params) => check(String(params[name])),
    { type: 'string', description },
    {
      required: true,
    },
  );

const fqn = path('fqn', pipelineParam, `A pipeline's FQN: ${NAME_RULE}`);

export const pipelinePath = z.object({ fqn });

export const runPath = z.object({
  fqn,
  runId: path(
    'runId',
    validateRunId,
    `A run id: ${NAME_RULE} \`latest\` names the pipeline's newest run on reads and streams.`,
  ),
});

export const topicPath = z.object({
  topic: path(
    'topic',
    topicParam,
    "`[A-Za-z0-9_.-]{1,128}`; topics starting with `_` are the server's own (`_runs`).",
  ),
});
