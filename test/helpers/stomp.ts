import { execFileSync } from 'node:child_process';
import net from 'node:net';

export const STOMP_PORT = 61613;

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
