import { randomBytes } from 'node:crypto';
import { Client } from '@stomp/stompjs';
import { TCPWrapper } from '@stomp/tcp-wrapper';
import { portOpen, STOMP_PORT } from './stomp.js';
import { sleep } from './wait.js';

// STOMP clients of the test's own against the real ActiveMQ of scripts/services.sh: a producer
// whose sends are confirmed, and the removal of a durable subscription a test left in the broker.

/** A source's line in /readyz (docs/API.md, "Health"). */
export interface SourceStatus {
  name: string;
  state: string;
  received: number;
  stored: number;
  invalid: number;
  lastError?: string;
}

export interface Readyz {
  status: string;
  sources: SourceStatus[];
}

/** The topic every test source stores into. */
export const TOPIC = 'iceberg';

/**
 * A source of its own: a fresh destination and name, so no durable subscription is shared with
 * another test (they outlive processes and tests in the broker).
 */
export function freshSource(prefix: string) {
  const suffix = randomBytes(6).toString('hex');
  return {
    type: 'stomp' as const,
    name: `tw-${prefix}-${suffix}`,
    destination: `/topic/TW_${prefix.toUpperCase()}_${suffix}`,
    topic: TOPIC,
  };
}
export type Source = ReturnType<typeof freshSource>;

/** An Iceberg commit event as the seed's producers send it. */
export function commitEvent(eventId: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({ eventId, eventType: 'COMMIT_SUCCESS', ...extra });
}

/** Polls `check` until it answers something other than undefined, or fails after `timeoutMs`. */
export async function waitUntil<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs: number,
  intervalMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${String(last)}` : ''}`,
      );
    }
    await sleep(intervalMs);
  }
}

export interface StompProducer {
  /** Sends a persistent message and resolves once ActiveMQ has taken it (its RECEIPT). */
  publish(body: string, destination: string): Promise<void>;
  close(): Promise<void>;
}

/** Connects a STOMP client to the test broker, or fails after `timeoutMs`. */
async function connect(
  headers: Record<string, string> = {},
  timeoutMs = 10_000,
): Promise<{ client: Client; failure: () => Error | undefined }> {
  const client = new Client({
    webSocketFactory: () => new TCPWrapper('127.0.0.1', STOMP_PORT),
    connectHeaders: { login: 'admin', passcode: 'admin', host: '/', ...headers },
    reconnectDelay: 0,
    heartbeatIncoming: 0,
    heartbeatOutgoing: 0,
  });
  let failure: Error | undefined;
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`STOMP: no CONNECTED in ${timeoutMs} ms`)),
        timeoutMs,
      );
      client.onConnect = () => {
        clearTimeout(timer);
        resolve();
      };
      client.onStompError = (frame) => {
        failure = new Error(`STOMP: ${frame.headers['message']}`);
        clearTimeout(timer);
        reject(failure);
      };
      client.onWebSocketError = () => {
        clearTimeout(timer);
        reject(new Error('STOMP: cannot reach ActiveMQ'));
      };
      client.activate();
    });
  } catch (error) {
    await Promise.race([client.deactivate(), sleep(5000)]);
    throw error;
  }
  return { client, failure: () => failure };
}

/** A producer whose every SEND asks for a RECEIPT, which ActiveMQ returns once it took it. */
export async function stompProducer(): Promise<StompProducer> {
  const { client, failure } = await connect();
  let n = 0;
  return {
    publish(body, destination) {
      const failed = failure();
      if (failed) return Promise.reject(failed);
      const receipt = `r-${(n += 1)}`;
      const confirmed = new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no receipt for ${receipt}`)), 15_000);
        client.watchForReceipt(receipt, () => {
          clearTimeout(timer);
          resolve();
        });
      });
      client.publish({ destination, body, headers: { persistent: 'true', receipt } });
      return confirmed;
    },
    async close() {
      await Promise.race([client.deactivate(), sleep(5000)]);
    },
  };
}

/**
 * Removes the durable subscription `subscriptionName` of `clientId` from the broker (UNSUBSCRIBE
 * with both, as StompSource names them). The broker may take a moment to notice that a killed
 * subscriber is gone (its client-id is then still "already connected"): tried a few times. Best
 * effort: the subscription may not exist.
 */
export async function removeDurableSubscription(
  clientId: string,
  subscriptionName: string,
  attempts = 5,
): Promise<boolean> {
  for (let attempt = 0; attempt < attempts; attempt += 1) {
    if (!(await portOpen(STOMP_PORT))) return false;
    let connected: Awaited<ReturnType<typeof connect>>;
    try {
      connected = await connect({ 'client-id': clientId }, 5000);
    } catch {
      await sleep(1000);
      continue;
    }
    const { client } = connected;
    try {
      return await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), 5000);
        client.onStompError = () => {
          clearTimeout(timer);
          resolve(false);
        };
        client.watchForReceipt('unsubscribed', () => {
          clearTimeout(timer);
          resolve(true);
        });
        client.unsubscribe('durable', {
          'activemq.subscriptionName': subscriptionName,
          receipt: 'unsubscribed',
        });
      });
    } finally {
      await Promise.race([client.deactivate(), sleep(5000)]);
    }
  }
  return false;
}
