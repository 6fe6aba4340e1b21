import { hostname } from 'node:os';
import { Client, ReconnectionTimeMode } from '@stomp/stompjs';
import type { IMessage } from '@stomp/stompjs';
import { TCPWrapper } from '@stomp/tcp-wrapper';
import { backoffDelay, sleep } from '../model/backoff.js';
import { BoundedJsonReader, MAX_JSON_DEPTH } from '../model/bounded-json.js';
import type { Ingest } from '../engine/ingest.js';
import { TailwaterError } from '../model/errors.js';
import { topicKey } from '../model/stream-key.js';
import type { StompSourceConfig } from './config.js';

/** `standby`: another server of the fleet holds the source's lease and its subscription. */
export type SourceState = 'connecting' | 'connected' | 'disconnected' | 'stopped' | 'standby';

export interface SourceStatus {
  name: string;
  type: 'stomp';
  state: SourceState;
  received: number;
  stored: number;
  invalid: number;
  lastError?: string | undefined;
}

/**
 * Subscribes to a STOMP destination (ActiveMQ's ICEBERG_METADATA_EVENTS topic, where Spark jobs publish Iceberg commits) and
 * stores each message as an event of a topic, exactly once:
 * - a durable subscription (client-id + activemq.subscriptionName), so messages published while
 *   Tailwater is down are delivered when it comes back;
 * - client-individual acks, sent only after the event is durably stored;
 * - the message's id field as the producer id, so a redelivery is acknowledged, not stored twice;
 * - a message that is not JSON, or has no id, goes with its raw body and the reason to the
 *   `<topic>.invalid` topic and is acknowledged: kept, visible, and not blocking the others.
 * Messages are handled one at a time, in the order the broker sent them.
 */
export class StompSource {
  readonly name: string;
  private readonly client: Client;
  private state: SourceState = 'connecting';
  private lastError: string | undefined;
  private received = 0;
  private stored = 0;
  private invalid = 0;
  private chain: Promise<void> = Promise.resolve();
  private stopping = false;

  constructor(
    private readonly config: StompSourceConfig,
    private readonly ingest: Ingest,
    private readonly log: (message: string) => void = () => {},
    /** The server's maxEventBytes: a dead letter keeps at most this much of a body. */
    private readonly maxEventBytes = 64 * 1024,
  ) {
    this.name = config.name ?? config.topic;
    const clientId = config.clientId ?? `tailwater-${this.name}-${hostname()}`;
    this.client = new Client({
      webSocketFactory: () => new TCPWrapper(config.host, config.port),
      connectHeaders: {
        login: config.login,
        passcode: config.passcode,
        host: config.vhost,
        ...(config.durable ? { 'client-id': clientId } : {}),
      },
      heartbeatIncoming: config.heartbeatMs,
      heartbeatOutgoing: config.heartbeatMs,
      reconnectDelay: 250,
      maxReconnectDelay: 10_000,
      reconnectTimeMode: ReconnectionTimeMode.EXPONENTIAL,
      onConnect: () => {
        this.state = 'connected';
        this.lastError = undefined;
        this.log(`source ${this.name}: connected to ${config.host}:${config.port}`);
        this.client.subscribe(config.destination, (message) => this.enqueue(message), {
          ack: 'client-individual',
          ...(config.durable ? { 'activemq.subscriptionName': `tailwater-${this.name}` } : {}),
        });
      },
      onStompError: (frame) => {
        this.lastError = frame.headers['message'] ?? 'STOMP error';
        this.log(`source ${this.name}: ${this.lastError}`);
      },
      onWebSocketClose: () => {
        if (this.state === 'connected') this.log(`source ${this.name}: disconnected`);
        if (!this.stopping) this.state = 'disconnected';
      },
      onWebSocketError: (event: unknown) => {
        this.lastError = describe(event);
      },
    });
  }

  /** Connects and subscribes; a source stopped before may be started again (a new lease). */
  start(): void {
    this.stopping = false;
    this.state = 'connecting';
    this.client.activate();
  }

  async stop(): Promise<void> {
    this.stopping = true;
    this.state = 'stopped';
    await this.chain.catch(() => undefined);
    await this.client.deactivate();
  }

  status(): SourceStatus {
    return {
      name: this.name,
      type: 'stomp',
      state: this.state,
      received: this.received,
      stored: this.stored,
      invalid: this.invalid,
      lastError: this.lastError,
    };
  }

  private enqueue(message: IMessage): void {
    this.received += 1;
    this.chain = this.chain.then(() => this.handle(message));
  }

  /**
   * Stores one message, then acknowledges it. Only a store that is unavailable is retried (the
   * message waits, unacknowledged, in order); a message Tailwater refuses for good is kept as a
   * dead letter instead, so one bad message never stops the ones behind it.
   */
  private async handle(message: IMessage): Promise<void> {
    for (let attempt = 0; !this.stopping; attempt += 1) {
      try {
        await this.store(message);
        message.ack();
        return;
      } catch (error) {
        if (error instanceof TailwaterError) {
          // Even its dead letter was refused: say so, and let the subscription move on.
          this.log(`source ${this.name}: dropped a message that cannot be kept: ${error.message}`);
          this.invalid += 1;
          message.ack();
          return;
        }
        this.lastError = describe(error);
        this.log(`source ${this.name}: could not store a message (${this.lastError}); retrying`);
        await sleep(backoffDelay(attempt, { initialMs: 200, maxMs: 5000 }));
      }
    }
  }

  private async store(message: IMessage): Promise<void> {
    const body = message.body;
    let parsed: unknown;
    let reason: string | undefined;
    const bytes = Buffer.byteLength(body, 'utf8');
    // Judged before it is parsed: a broker can carry a message of 100 MB.
    if (bytes > this.maxEventBytes) {
      reason = `refused: the message is ${bytes} bytes; an event holds at most ${this.maxEventBytes}`;
    } else {
      try {
        parsed = await readBoundedJson(body);
      } catch (error) {
        reason = `not valid JSON: ${(error as Error).message}`;
      }
    }
    const id =
      reason === undefined && typeof parsed === 'object' && parsed !== null
        ? (parsed as Record<string, unknown>)[this.config.idField]
        : undefined;
    if (reason === undefined && (typeof id !== 'string' || id.length === 0 || id.length > 256)) {
      reason = `no string field "${this.config.idField}" to identify the event`;
    }
    if (reason === undefined) {
      try {
        await this.ingest.appendEvents(topicKey(this.config.topic), [
          { kind: this.config.kind, data: parsed, dataJson: body, id: id as string },
        ]);
        this.stored += 1;
        return;
      } catch (error) {
        if (!(error instanceof TailwaterError)) throw error;
        reason = `refused: ${error.message}`;
      }
    }
    await this.deadLetter(message, reason);
  }

  /** Keeps a message Tailwater cannot store as an event, with the reason, in `<topic>.invalid`. */
  private async deadLetter(message: IMessage, reason: string): Promise<void> {
    const messageId = message.headers['message-id'];
    const bodyBytes = Buffer.byteLength(message.body, 'utf8');
    // Room for the reason and headers beside the body within one event.
    const room = Math.max(1024, this.maxEventBytes - 4096);
    const truncated = bodyBytes > room;
    await this.ingest.appendEvents(topicKey(`${this.config.topic}.invalid`), [
      {
        kind: 'invalid',
        data: {
          reason,
          body: truncated ? prefix(message.body, room) : message.body,
          ...(truncated ? { bodyBytes, truncated: true } : {}),
          destination: message.headers['destination'],
          messageId,
        },
        // A redelivered invalid message is kept once too.
        id: messageId ? `stomp:${messageId}` : undefined,
      },
    ]);
    this.invalid += 1;
  }
}

/** A message body read with the same budget as an HTTP body (nesting depth above all). */
function readBoundedJson(body: string): Promise<unknown> {
  const reader = new BoundedJsonReader({ maxDepth: MAX_JSON_DEPTH, maxValues: 100_000 });
  reader.feed(Buffer.from(body, 'utf8'));
  return reader.finish();
}

/** The longest start of `text` within `maxBytes` of UTF-8 that ends on a character boundary. */
function prefix(text: string, maxBytes: number): string {
  const bytes = Buffer.from(text, 'utf8');
  let end = Math.min(maxBytes, bytes.length);
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end -= 1;
  return bytes.toString('utf8', 0, end);
}

function describe(error: unknown): string {
  if (error instanceof Error) return error.message;
  const message = (error as { message?: unknown } | undefined)?.message;
  return typeof message === 'string' ? message : String(error);
}
