import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ROOT,
  checkBrowserPrerequisites,
  launchChromium,
  newPage,
  screenshot,
} from '../helpers/browser.js';

// The README's promise: "`npm start`, then open http://127.0.0.1:8585/" shows the demo
// pipeline's run moving. This runs the real `npm start` script (with `--port 0`, since 8585 may
// be taken, and a fresh data directory) and looks at the dashboard in Debian's Chromium.
// Needs `npm run build` and `bash scripts/services.sh` (which installs /usr/bin/chromium).

const DEMO_PIPELINE = 'demo.nightly_etl';
/** The default for every wait of the page; no wait in this file is longer than ~20 s. */
const UI_TIMEOUT = 15_000;
const START_TIMEOUT = 20_000;
const STOP_TIMEOUT = 10_000;
/** How long the log and the progress bar get to move (the demo writes every second). */
const MOVE_TIMEOUT = 10_000;

interface NpmStart {
  url: string;
  child: ChildProcess;
  output(): string;
  /** Ends the whole process group (npm, its shell, the server) and waits for it to be gone. */
  stop(): Promise<void>;
}

const groupAlive = (pgid: number): boolean => {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
};

async function waitForGroupExit(pgid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (groupAlive(pgid)) {
    if (Date.now() > deadline) return false;
    await new Promise<void>((resolve) => setTimeout(resolve, 50));
  }
  return true;
}

/**
 * Runs `npm start -- <args>` (npm appends the args to the script's command) in its own process
 * group and waits for the server's "listening on http://…" line.
 */
async function startNpmStart(
  args: string[],
  settings: Record<string, string> = {},
  timeoutMs = START_TIMEOUT,
): Promise<NpmStart> {
  const env: NodeJS.ProcessEnv = { ...process.env, npm_config_update_notifier: 'false' };
  // As a newcomer would run it: no settings from this shell's TAILWATER_* variables.
  for (const name of Object.keys(env)) if (name.startsWith('TAILWATER_')) delete env[name];
  Object.assign(env, settings);
  const child = spawn('npm', ['start', '--', ...args], {
    cwd: ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const pgid = child.pid;
  let output = '';
  const onData = (chunk: Buffer) => {
    output += chunk.toString();
  };
  child.stdout!.on('data', onData);
  child.stderr!.on('data', onData);
  const stop = async (): Promise<void> => {
    if (pgid === undefined || !groupAlive(pgid)) return;
    process.kill(-pgid, 'SIGTERM');
    if (await waitForGroupExit(pgid, STOP_TIMEOUT)) return;
    if (groupAlive(pgid)) process.kill(-pgid, 'SIGKILL');
    await waitForGroupExit(pgid, STOP_TIMEOUT);
  };
  const url = await new Promise<string>((resolve, reject) => {
    const fail = (error: Error) => {
      clearTimeout(timer);
      child.stdout!.off('data', check);
      reject(error);
    };
    const timer = setTimeout(
      () => fail(new Error(`npm start did not listen in ${timeoutMs} ms:\n${output}`)),
      timeoutMs,
    );
    const check = () => {
      const match = /listening on (http:\/\/\S+)/.exec(output);
      if (!match) return;
      clearTimeout(timer);
      child.stdout!.off('data', check);
      resolve(match[1]!);
    };
    child.stdout!.on('data', check);
    child.stderr!.on('data', check);
    child.once('error', fail);
    child.once('exit', (code, signal) =>
      fail(new Error(`npm start exited (${code ?? signal}) before listening:\n${output}`)),
    );
  }).catch(async (error: unknown) => {
    await stop();
    throw error;
  });
  return { url, child, output: () => output, stop };
}

interface LogLine {
  number: number;
  text: string;
}

/** The newest line the run log shows: its line number and its text. */
async function lastLogLine(log: Locator): Promise<LogLine | null> {
  return log.locator('.log-line').evaluateAll((elements) => {
    let last: LogLine | null = null;
    for (const element of elements) {
      const number = Number(element.querySelector('.line-number')?.textContent?.trim());
      const text = element.querySelector('.line-text')?.textContent ?? '';
      if (Number.isInteger(number) && (last === null || number > last.number)) {
        last = { number, text };
      }
    }
    return last;
  });
}

/** The progress bar's aria-valuenow, as a number (NaN when absent). */
const progressValue = async (bar: Locator): Promise<number> =>
  Number((await bar.getAttribute('aria-valuenow')) ?? Number.NaN);

describe('`npm start`, then the dashboard in Chromium', () => {
  let server: NpmStart | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let dataDir: string | undefined;
  /** The demo run's page, as linked from the runs list. */
  let runUrl: string | undefined;

  beforeAll(async () => {
    checkBrowserPrerequisites();
    dataDir = mkdtempSync(join(tmpdir(), 'tailwater-demo-'));
    // Runs of 5 minutes rather than one, so that the run the tests follow is still running when
    // the last of them looks at it, however long the machine takes to get there.
    server = await startNpmStart(['--port', '0', '--data', dataDir], {
      TAILWATER_DEMO_RUN_SECONDS: '300',
    });
    const url = new URL(server.url);
    expect(url.hostname).toBe('127.0.0.1');
    expect(url.port).not.toBe('8585');
    browser = await launchChromium();
    page = await newPage(browser, UI_TIMEOUT);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('opens / on /ui/, listing demo.nightly_etl with a running run', async () => {
    await page.goto(`${server!.url}/`);
    const landed = new URL(page.url());
    expect(landed.origin).toBe(new URL(server!.url).origin);
    expect(landed.pathname).toBe('/ui/');

    const table = page.getByRole('table', { name: 'Pipelines' });
    await table.getByRole('link', { name: DEMO_PIPELINE, exact: true }).waitFor();
    const running = table
      .getByRole('row')
      .filter({ has: page.locator('.run-status', { hasText: /^running$/ }) });
    await running.first().waitFor();
    // The row's links: its pipeline's page, then its newest run.
    const link = running.first().getByRole('link').nth(1);
    const href = await link.getAttribute('href');
    expect(href).toMatch(
      new RegExp(`^/ui/pipelines/${DEMO_PIPELINE.replace('.', '\\.')}/runs/demo-[^/]+$`),
    );
    await screenshot(page, 'dashboard-demo-runs-list.png');

    await link.click();
    await page.waitForURL((url) => url.pathname === href);
    runUrl = page.url();
  });

  it("shows the demo run's log growing while its status reads running", async () => {
    expect(runUrl, 'the runs list did not link to a running demo run').toBeDefined();
    expect(page.url()).toBe(runUrl);
    const log = page.getByRole('log', { name: 'Run log' });
    await log.waitFor();
    await log.locator('.log-line').first().waitFor();
    const status = page.getByTestId('run-status');
    await status.getByText('running', { exact: true }).waitFor();

    const first = await lastLogLine(log);
    expect(first, 'the run log shows no numbered line').not.toBeNull();
    // A demo line: "<time> INFO [extract] orders: 1234 rows (5678 total)".
    expect(first!.text).toMatch(/INFO \[(extract|transform|load)\] \w+: \d+ rows \(\d+ total\)/);
    // The demo writes three lines a second: the newest line moves on, more than once.
    await expect
      .poll(async () => (await lastLogLine(log))?.number ?? 0, { timeout: MOVE_TIMEOUT })
      .toBeGreaterThan(first!.number + 3);
    const later = await lastLogLine(log);
    expect(later!.text).not.toBe(first!.text);
    expect(await status.textContent()).toBe('running');
    await screenshot(page, 'dashboard-demo-run-view.png');
  });

  it("shows the demo run's progress bar value increasing", async () => {
    expect(runUrl, 'the runs list did not link to a running demo run').toBeDefined();
    if (page.url() !== runUrl) await page.goto(runUrl!);
    const bar = page.getByRole('progressbar', { name: 'Run progress' });
    await bar.waitFor();
    await expect.poll(() => progressValue(bar), { timeout: MOVE_TIMEOUT }).toBeGreaterThan(0);
    const first = await progressValue(bar);
    await expect.poll(() => progressValue(bar), { timeout: MOVE_TIMEOUT }).toBeGreaterThan(first);
    expect(await progressValue(bar)).toBeLessThanOrEqual(100);
    expect(await page.getByTestId('run-status').textContent()).toBe('running');
  });

  it("lists the demo run's step events, which the Kind filter narrows", async () => {
    if (page.url() !== runUrl) await page.goto(runUrl!);
    const table = page.getByRole('table', { name: 'Run events' });
    await table.getByRole('cell', { name: 'step', exact: true }).first().waitFor();
    await page.getByRole('combobox', { name: 'Kind' }).selectOption('step');
    const kinds = await table.locator('tbody tr td:nth-child(2)').allTextContents();
    expect(kinds.length).toBeGreaterThan(0);
    expect(new Set(kinds)).toEqual(new Set(['step']));
  });

  it("shows the demo's table commits in the Iceberg view, snapshot ids intact", async () => {
    await page.goto(`${server!.url}/ui/topics/iceberg`);
    const row = page.getByRole('table').getByRole('row').filter({ hasText: 'demo_db.' });
    // The demo commits a table every 5 s of a run.
    await row.first().waitFor({ timeout: MOVE_TIMEOUT + 5_000 });
    const cells = await row.first().getByRole('cell').allTextContents();
    expect(cells[1]).toMatch(/^demo_db\.\w+$/);
    expect(cells[2]).toBe('append');
    expect(Number(cells[3])).toBeGreaterThan(0);
    await screenshot(page, 'dashboard-demo-iceberg.png');
    // The snapshot id is past 2^53 and comes out of the API digit for digit.
    const listed = await fetch(`${server!.url}/api/v1/topics/iceberg/entries`);
    expect(await listed.text()).toMatch(/"snapshotId":73400000000000\d{5}[,}]/);
  });
});
