import type { ChildProcess } from 'node:child_process';

/**
 * Asks a child process to stop (`ask`: a signal sent, a shutdown command run), then waits up to
 * `timeoutMs` for it to exit, and kills it after that.
 */
export async function stopChild(
  child: ChildProcess,
  ask: () => unknown,
  timeoutMs: number,
): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await ask();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    exited,
    new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        child.kill('SIGKILL');
        resolve();
      }, timeoutMs);
    }),
  ]);
  clearTimeout(timer);
}
