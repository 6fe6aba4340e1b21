import type { Bus } from '../bus/bus.js';
import type { NewEvent } from '../model/entry.js';
import { TailwaterError } from '../model/errors.js';
import { splitLogText } from '../model/log-chunks.js';
import { validateEventKind, validateLabel, validateProducerId } from '../model/names.js';
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

  /** Creates or updates a run; its `meta` is at most maxEventBytes of JSON, like an event. */
  async putRun(pipeline: string, runId: string, update: RunUpdate): Promise<PutRunResult> {
    if (update.meta !== undefined) {
      const size = Buffer.byteLength(JSON.stringify(update.meta), 'utf8');
      if (size > this.settings.maxEventBytes) {
        throw new TailwaterError(
          'TW_META_TOO_LARGE',
          `meta exceeds ${this.settings.maxEventBytes} bytes (was ${size}); keep large documents elsewhere and link to them.`,
        );
      }
    }
    return this.ring(await this.store.putRun(pipeline, runId, update));
  }

  async requestCancel(pipeline: string, runId: string): Promise<PutRunResult> {
    return this.ring(await this.store.requestCancel(pipeline, runId));
  }

  /** Deletes a run; its viewers are told (gap, then `end runDeleted`) and the runs feed too. */
  async deleteRun(pipeline: string, runId: string): Promise<PutRunResult> {
    return this.ring(await this.store.deleteRun(pipeline, runId));
  }

  /**
   * Appends log text, cut into entries of at most maxEventBytes at line ends. A producer id is
   * kept on the first entry, which stands for the whole append: a retry with the same id and
   * the same text is acknowledged as the original, with other text it is a conflict.
   */
  async appendLog(pipeline: string, runId: string, log: LogAppend): Promise<AppendLogResult> {
    if (log.text.length === 0) {
      throw new TailwaterError('TW_BAD_REQUEST', 'The log text is empty.');
    }
    if (!log.text.isWellFormed()) {
      throw new TailwaterError(
        'TW_BAD_UTF8',
        'text is not valid Unicode text (a lone surrogate); it was not stored.',
      );
    }
    const step = log.step === undefined ? undefined : validateLabel('step', log.step);
    const id = log.id === undefined ? undefined : validateProducerId('id', log.id);
    // PostgreSQL's text cannot hold U+0000, which a program's output may: every store keeps it
    // as U+FFFD, as a decoder keeps a broken byte, rather than one store refusing the append.
    const text = log.text.includes('\u0000') ? log.text.replaceAll('\u0000', '\uFFFD') : log.text;
    const pieces = splitLogText(text, this.settings.maxEventBytes);
    const chunks = pieces.map((text, index) => ({
      text,
      step,
      id: index === 0 ? id : undefined,
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
    const checked = events.map((event, index) => this.checkEvent(event, index));
    return this.ring(await this.store.appendEvents(key, checked));
  }

  /** The event as it will be stored: names checked and normalized, data within its size. */
  private checkEvent(event: NewEvent, index: number): NewEvent {
    // Where the event is, for messages; built only when there is one to write.
    const at = (field = '') => `events[${index}]${field}`;
    let kind: string;
    try {
      kind = validateEventKind(event.kind);
    } catch (error) {
      if (error instanceof TailwaterError)
        throw new TailwaterError(error.code, `${at()}: ${error.message}`);
      throw error;
    }
    const dataJson = event.dataJson ?? JSON.stringify(event.data ?? null);
    const size = Buffer.byteLength(dataJson, 'utf8');
    if (size > this.settings.maxEventBytes) {
      throw new TailwaterError(
        'TW_EVENT_TOO_LARGE',
        `${at()}: data exceeds ${this.settings.maxEventBytes} bytes (was ${size}).`,
      );
    }
    return {
      kind,
      data: event.data,
      dataJson,
      step: event.step === undefined ? undefined : validateLabel(at('.step'), event.step),
      correlationId:
        event.correlationId === undefined
          ? undefined
          : validateLabel(at('.correlationId'), event.correlationId),
      id: event.id === undefined ? undefined : validateProducerId(at('.id'), event.id),
      extra: event.extra,
    };
  }

  private ring<T extends { written: Written[] }>(result: T): T {
    for (const { key, seq } of result.written) this.bus.notify(streamId(key), seq);
    return result;
  }
}
