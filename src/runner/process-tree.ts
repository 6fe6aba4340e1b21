import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

const CHECK_EVERY_MS = 100;

/**
 * Starts a command in a process group of its own, so that stopping it stops everything it
 * started too. stdout and stderr are both piped (the runner merges them).
 */
export function spawnGroup(command: string, args: readonly string[]): ChildProcess {
  return spawn(command, args, { detached: true, stdio: ['inherit', 'pipe', 'pipe'] });
}

/**
 * Freight's stop: terminate the whole group, and kill what is left of it after `graceMs`.
 * Resolves once no process of the group is running any more (the leader included), so a child
 * that ignores SIGTERM cannot outlive the runner.
 */
export async function stopGroup(child: ChildProcess, graceMs: number): Promise<void> {
  const pgid = child.pid;
  if (pgid === undefined) return;
  const leaderExited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  signalGroup(pgid, 'SIGTERM');
  const deadline = Date.now() + graceMs;
  while (groupAlive(pgid) && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, CHECK_EVERY_MS));
  }
  if (groupAlive(pgid)) signalGroup(pgid, 'SIGKILL');
  await leaderExited;
  for (let i = 0; i < 50 && groupAlive(pgid); i += 1) {
    await new Promise((resolve) => setTimeout(resolve, CHECK_EVERY_MS));
  }
}

function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch {
    // the group is already gone
  }
}

/**
 * Whether a process of the group is still running. `kill(-pgid, 0)` also counts zombies, which
 * an init that reaps slowly can leave for seconds; on Linux /proc tells them apart.
 */
export function groupAlive(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // gone meanwhile
    }
    // pid (comm) state ppid pgrp …; comm may hold spaces and parentheses: split after the last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    if (Number(fields[2]) === pgid && fields[0] !== 'Z' && fields[0] !== 'X') return true;
  }
  return false;
}
