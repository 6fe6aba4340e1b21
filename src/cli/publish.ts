import type { Command } from 'commander';
import type { Target } from '../client/http-client.js';
import type { NewEvent } from '../model/entry.js';
import { validateFqn, validateProducerKind, validateRunId, validateTopic } from '../model/names.js';
import type { ClientFlags } from './client-options.js';
import { addClientOptions, checkArgument, clientFrom, UsageError } from './client-options.js';

interface PublishFlags extends ClientFlags {
  kind: string;
  topic?: string;
  step?: string;
  correlationId?: string;
  id?: string;
}

export function publishCommand(program: Command): void {
  const command = program
    .command('publish')
    .description(
      "Publish one event to a run or a topic and print its seq once it is stored. <json> is the event's data.",
    )
    .usage('<fqn> <runId> --kind <kind> [options] <json>  |  --topic <topic> --kind <kind> <json>')
    .argument('<args...>', '<fqn> <runId> <json>, or <json> with --topic')
    .requiredOption('--kind <kind>', 'the kind of event, e.g. progress')
    .option('--topic <topic>', 'publish to this topic instead of a run')
    .option('--step <step>', 'the step the event belongs to')
    .option('--correlation-id <id>', 'a correlation id to filter on')
    .option('--id <id>', 'producer id: publishing the same id again stores nothing new');
  addClientOptions(command).action(async (args: string[], flags: PublishFlags) => {
    const { target, json } = parseTarget(args, flags);
    const kind = checkArgument('--kind', () => validateProducerKind(flags.kind));
    let data: unknown;
    try {
      data = JSON.parse(json);
    } catch (error) {
      throw new UsageError(
        `the event data is not valid JSON (${(error as Error).message}); ` +
          `quote strings in the JSON too, e.g. '"done"' or '{"pct":50}'.`,
      );
    }
    const event: NewEvent = { kind, data };
    if (flags.step !== undefined) event.step = flags.step;
    if (flags.correlationId !== undefined) event.correlationId = flags.correlationId;
    if (flags.id !== undefined) event.id = flags.id;
    const result = await clientFrom(flags).appendEvents(target, [event]);
    const seq = result.seqs[0] ?? result.last;
    if (result.duplicates > 0) {
      process.stderr.write(
        `tailwater: an event with id ${flags.id} was already stored (seq ${seq}); nothing new was stored\n`,
      );
    }
    process.stdout.write(`${seq}\n`);
  });
}

function parseTarget(args: string[], flags: PublishFlags): { target: Target; json: string } {
  if (flags.topic !== undefined) {
    const topic = checkArgument('--topic', () => validateTopic(flags.topic!));
    if (args.length !== 1) {
      throw new UsageError(
        `with --topic, give only the event's JSON data (got ${args.length} arguments).`,
      );
    }
    return { target: { topic }, json: args[0]! };
  }
  if (args.length !== 3) {
    throw new UsageError(
      `expected <fqn> <runId> <json> (or --topic <topic> <json>); got ${args.length} argument${args.length === 1 ? '' : 's'}.`,
    );
  }
  const [fqn, runId, json] = args as [string, string, string];
  checkArgument('fqn', () => validateFqn(fqn));
  checkArgument('runId', () => validateRunId(runId));
  if (runId === 'latest') {
    throw new UsageError('runId: "latest" names the newest run on reads; publish to a run id.');
  }
  return { target: { pipeline: fqn, runId }, json };
}
