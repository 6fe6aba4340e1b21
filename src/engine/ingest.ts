import type { Bus } from '../bus/bus.js';
import type { NewEvent } from '../model/entry.js';
import { TailwaterError } from '../model/errors.js';
import { splitLogText } from '../model/log-chunks.js';
import { validateProducerKind } from '../model/names.js';
import type { StreamKey } from '../model/stream-key.js';
import { streamId } from '../model/stream-key.js';
import type {
  AppendEventsResult,
  AppendLogResult,
  PutRunResult,
  RunUpdate,
  Store,
  Written,
} from '../store/store.js';
import type { EngineSettings } from './engine-settings.js';

export interface LogAppend {
  text: string;
  step?: string | undefined;
  id?: string | undefined;
}

/**
 * The one way in for every producer (HTTP, STOMP, the demo): it applies the limits that hold
 * whatever the transport, writes to the store, and only then rings the bus, so a viewer is
 * never told of an entry that is not durable.
 */
export class Ingest {
  constructor(
    private readonly store: Store,
    private readonly bus: Bus,
    private readonly settings: Pick<EngineSettings, 'maxEventBytes' | 'maxBatchEntries'>,
  ) {}

  async putRun(pipeline: string, runId: string, update: RunUpdate): Promise<PutRunResult> {
    return this.ring(await this.store.putRun(pipeline, runId, update));
  }

  async requestCancel(pipeline: string, runId: string): Promise<PutRunResult> {
    return this.ring(await this.store.requestCancel(pipeline, runId));
  }

  /**
   * Appends log text, cut into entries of at most maxEventBytes at line ends. With a producer
   * id, the first chunk carries the id and the others `id#1`, `id#2`…, so a retried append is
   * recognised as a whole.
   */
  async appendLog(pipeline: string, runId: string, log: LogAppend): Promise<AppendLogResult> {
    if (log.text.length === 0) {
      throw new TailwaterError('TW_BAD_REQUEST', 'The log text is empty.');
    }
    checkWellFormed('', { text: log.text });
    checkLabels('', { step: log.step, id: log.id });
    const pieces = splitLogText(log.text, this.settings.maxEventBytes);
    const chunks = pieces.map((text, index) => ({
      text,
      step: log.step,
      id: log.id === undefined ? undefined : index === 0 ? log.id : `${log.id}#${index}`,
    }));
    return this.ring(await this.store.appendLog(pipeline, runId, chunks));
  }

  /** Appends a batch all-or-nothing; the first bad event is named by its index. */
  async appendEvents(key: StreamKey, events: readonly NewEvent[]): Promise<AppendEventsResult> {
    if (events.length === 0) {
      throw new TailwaterError('TW_BAD_REQUEST', 'A batch needs at least one event.');
    }
    if (events.length > this.settings.maxBatchEntries) {
      throw new TailwaterError(
        'TW_BATCH_TOO_LARGE',
        `A batch holds at most ${this.settings.maxBatchEntries} events (was ${events.length}).`,
      );
    }
    events.forEach((event, index) => this.checkEvent(event, index));
    return this.ring(await this.store.appendEvents(key, events));
  }

  private checkEvent(event: NewEvent, index: number): void {
    checkLabels(`events[${index}].`, {
      step: event.step,
      correlationId: event.correlationId,
      id: event.id,
    });
    try {
      validateProducerKind(event.kind);
    } catch (error) {
      if (error instanceof TailwaterError) {
        throw new TailwaterError(error.code, `events[${index}]: ${error.message}`);
      }
      throw error;
    }
    const size = Buffer.byteLength(event.dataJson ?? JSON.stringify(event.data ?? null), 'utf8');
    if (size > this.settings.maxEventBytes) {
      throw new TailwaterError(
        'TW_EVENT_TOO_LARGE',
        `events[${index}]: data exceeds ${this.settings.maxEventBytes} bytes (was ${size}).`,
      );
    }
  }

  private ring<T extends { written: Written[] }>(result: T): T {
    for (const { key, seq } of result.written) this.bus.notify(streamId(key), seq);
    return result;
  }
}

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

/**
 * Steps, correlation ids and producer ids end up in SSE `id:` lines, headers and logs: like
 * names, they must be well-formed text without control characters.
 */
function checkLabels(prefix: string, fields: Record<string, string | undefined>): void {
  checkWellFormed(prefix, fields);
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined && CONTROL.test(value)) {
      throw new TailwaterError(
        'TW_BAD_NAME',
        `${prefix}${name} must not contain control characters (line breaks included).`,
      );
    }
  }
}

/**
 * A JSON body can carry a lone surrogate (`"\ud800"`), which is not Unicode text: SQLite would
 * store it as U+FFFD and byte offsets would drift. Such text is refused like broken UTF-8.
 */
function checkWellFormed(prefix: string, fields: Record<string, string | undefined>): void {
  for (const [name, value] of Object.entries(fields)) {
    if (value !== undefined && !value.isWellFormed()) {
      throw new TailwaterError(
        'TW_BAD_UTF8',
        `${prefix}${name} is not valid Unicode text (a lone surrogate); it was not stored.`,
      );
    }
  }
}
