import { execFile } from 'node:child_process';
import { BIN } from './server-process.js';

export interface CliOutcome {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `bin/tailwater` to its end (30 s at most) with no TAILWATER_* settings but those given. */
export function runCli(args: string[], env: Record<string, string> = {}): Promise<CliOutcome> {
  const clean = Object.fromEntries(
    Object.entries(process.env).filter(([key]) => !key.startsWith('TAILWATER_')),
  );
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [BIN, ...args],
      { env: { ...clean, ...env }, timeout: 30_000 },
      (error, stdout, stderr) => {
        const code = error ? (typeof error.code === 'number' ? error.code : -1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}
