import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

/**
 * Starts a command in a process group of its own, so that stopping it stops everything it
 * started too. stdout and stderr are both piped (the runner merges them).
 */
export function spawnGroup(command: string, args: readonly string[]): ChildProcess {
  return spawn(command, args, { detached: true, stdio: ['inherit', 'pipe', 'pipe'] });
}

/**
 * Terminates the whole group, then kills it if it is still there after `graceMs` (Freight:
 * terminate, then kill after 10 s). Resolves when the group leader has exited.
 */
export async function stopGroup(child: ChildProcess, graceMs: number): Promise<void> {
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  signalGroup(child, 'SIGTERM');
  const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), graceMs);
  await exited;
  // The leader may be gone while children that ignored SIGTERM live on: they get the kill.
  await new Promise((resolve) => setTimeout(resolve, Math.min(graceMs, 50)));
  if (groupAlive(child)) {
    await new Promise((resolve) => setTimeout(resolve, graceMs));
    signalGroup(child, 'SIGKILL');
  }
  clearTimeout(timer);
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // the group is already gone
  }
}

function groupAlive(child: ChildProcess): boolean {
  if (child.pid === undefined) return false;
  try {
    process.kill(-child.pid, 0);
    return true;
  } catch {
    return false;
  }
}
