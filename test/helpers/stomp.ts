import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { Client } from '@stomp/stompjs';
import { TCPWrapper } from '@stomp/tcp-wrapper';

export const STOMP_PORT = 61613;
export const ICEBERG_DESTINATION = '/topic/ICEBERG_METADATA_EVENTS';

/** A STOMP producer, like the seed's Spark job, publishing to ActiveMQ on loopback. */
export async function stompProducer(): Promise<{
  publish(body: string, destination?: string): void;
  close(): Promise<void>;
}> {
  const client = new Client({
    webSocketFactory: () => new TCPWrapper('127.0.0.1', STOMP_PORT),
    connectHeaders: { login: 'admin', passcode: 'admin', host: '/' },
    reconnectDelay: 0,
    heartbeatIncoming: 0,
    heartbeatOutgoing: 0,
  });
  await new Promise<void>((resolve, reject) => {
    client.onConnect = () => resolve();
    client.onStompError = (frame) => reject(new Error(frame.headers['message']));
    client.onWebSocketError = () => reject(new Error('cannot reach ActiveMQ on 127.0.0.1:61613'));
    client.activate();
  });
  return {
    publish(body, destination = ICEBERG_DESTINATION) {
      client.publish({ destination, body, headers: { persistent: 'true' } });
    },
    async close() {
      await client.deactivate();
    },
  };
}

export function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

async function waitForPort(open: boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while ((await portOpen(STOMP_PORT)) !== open) {
    if (Date.now() > deadline) throw new Error(`ActiveMQ port did not ${open ? 'open' : 'close'}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Stops the broker (scripts/services.sh started it) and waits for its port to close. */
export async function stopActiveMq(): Promise<void> {
  execFileSync('/etc/init.d/activemq', ['stop'], { stdio: 'ignore' });
  await waitForPort(false, 60_000);
}

/** Starts it again through the project's own script, which waits for the port. */
export async function startActiveMq(): Promise<void> {
  execFileSync('bash', [new URL('../../scripts/services.sh', import.meta.url).pathname], {
    stdio: 'inherit',
  });
  await waitForPort(true, 60_000);
}
