import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TIMEOUT_MS = 240_000;

interface Outcome {
  code: number | string;
  output: string;
}

/** Runs the Python client's unittest suite (clients/python/tests), which starts its own servers. */
function runPythonSuite(): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.env['TAILWATER_TEST_PYTHON'] ?? 'python3',
      ['-m', 'unittest', 'discover', '-s', 'clients/python/tests', '-v'],
      {
        cwd: ROOT,
        env: {
          ...process.env,
          // The suite's servers run on this Node; no __pycache__ is left in the source tree.
          TAILWATER_TEST_NODE: process.execPath,
          PYTHONDONTWRITEBYTECODE: '1',
          PYTHONUNBUFFERED: '1',
          TAILWATER_SERVER: '',
          TAILWATER_TOKEN: '',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), TIMEOUT_MS - 5_000);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code: code ?? signal ?? -1, output });
    });
  });
}

describe('the Python client (clients/python)', () => {
  it(
    'passes its unittest suite against real servers, every test run and none skipped',
    async () => {
      const { code, output } = await runPythonSuite();
      expect(code, output).toBe(0);
      const ran = /^Ran (\d+) tests? in /m.exec(output);
      expect(ran, output).not.toBeNull();
      expect(Number(ran![1]), output).toBeGreaterThan(0);
      // `OK` alone: a skip would print `OK (skipped=N)`, and `... skipped '<reason>'` per test.
      expect(output, output).toMatch(/^OK$/m);
      expect(output, output).not.toMatch(/\.\.\. skipped|skipped=/);
    },
    TIMEOUT_MS,
  );
});
