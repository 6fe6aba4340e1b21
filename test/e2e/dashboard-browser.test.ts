import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postLog, putStatus, runPath, sendEvents } from '../helpers/api.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { SEED_ICEBERG_EVENT } from '../helpers/fixtures.js';

// The dashboard in a real browser (Debian's Chromium, driven by playwright-core) against a
// real `tailwater serve` serving dist/web. Needs `npm run build` and `bash scripts/services.sh`
// (which installs /usr/bin/chromium); never `npx playwright install`.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OUTPUT = join(ROOT, 'test-output');
const CHROMIUM = '/usr/bin/chromium';
const PIPELINE = 'browser.test';
const RUN_ID = 'r1';
const RUN = runPath(PIPELINE, RUN_ID);
const UI_TIMEOUT = 15_000;

const SEED_EVENT = SEED_ICEBERG_EVENT;

const lines = (from: number, to: number): string => {
  let text = '';
  for (let n = from; n <= to; n += 1) text += `line ${n}\n`;
  return text;
};

interface LogScroll {
  scrollTop: number;
  scrollHeight: number;
  clientHeight: number;
}

const logScroll = (page: Page): Promise<LogScroll> =>
  page.getByTestId('log').evaluate((element) => ({
    scrollTop: element.scrollTop,
    scrollHeight: element.scrollHeight,
    clientHeight: element.clientHeight,
  }));

const atBottom = (s: LogScroll): boolean => s.scrollTop + s.clientHeight >= s.scrollHeight - 2;

/** Polls the log's scroll position until `ok` holds (the page's DOM, no fixed sleeps). */
async function waitForScroll(
  page: Page,
  ok: (s: LogScroll) => boolean,
  timeoutMs = UI_TIMEOUT,
): Promise<LogScroll> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await logScroll(page);
    if (ok(s)) return s;
    if (Date.now() > deadline) throw new Error(`log scroll not as expected: ${JSON.stringify(s)}`);
    await page.waitForTimeout(20);
  }
}

/** The log line whose text is exactly `text`, inside the run log. */
const logLine = (page: Page, text: string) =>
  page
    .getByRole('log', { name: 'Run log' })
    .locator('.log-line')
    .filter({ has: page.locator('.line-text', { hasText: new RegExp(`^${text}$`) }) });

/** Whether `text`'s line lies entirely inside the log's visible box. */
async function lineInView(page: Page, text: string): Promise<boolean> {
  const line = await logLine(page, text).boundingBox();
  const log = await page.getByTestId('log').boundingBox();
  if (!line || !log) return false;
  return line.y >= log.y - 1 && line.y + line.height <= log.y + log.height + 1;
}

async function screenshot(page: Page, name: string): Promise<string> {
  const path = join(OUTPUT, name);
  await page.screenshot({ path, fullPage: true });
  console.log(`dashboard screenshot: ${path}`);
  return path;
}

describe('the dashboard in Chromium', () => {
  let server: ServerProcess | undefined;
  let browser: Browser | undefined;
  let page: Page;
  let dataDir: string;

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) {
      throw new Error(`${CHROMIUM} is missing: run \`bash scripts/services.sh\` first`);
    }
    if (!existsSync(join(ROOT, 'dist/web/index.html'))) {
      throw new Error('dist/web is missing: run `npm run build` first');
    }
    mkdirSync(OUTPUT, { recursive: true });
    dataDir = mkdtempSync(join(tmpdir(), 'tailwater-browser-'));
    server = await startServerProcess(['--data', dataDir, '--host', '127.0.0.1'], {
      TAILWATER_POLL_SECONDS: '0.05',
      TAILWATER_FINISH_GRACE_SECONDS: '0.5',
    });
    expect(new URL(server.url).hostname).toBe('127.0.0.1');
    // launch() gives the browser a fresh, temporary profile of its own (a user-data-dir).
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      timeout: 60_000,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    context.setDefaultTimeout(UI_TIMEOUT);
    page = await context.newPage();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('lists the pipelines and their runs', async () => {
    await putStatus(server!, RUN, 'running');
    await postLog(server!, RUN, lines(1, 200));
    await page.goto(`${server!.url}/ui/`);
    const table = page.getByRole('table', { name: `Runs of ${PIPELINE}` });
    await table.waitFor();
    await table.getByRole('link', { name: RUN_ID }).waitFor();
    await page.getByTestId('connection-status').getByText('CONNECTED', { exact: true }).waitFor();
    await screenshot(page, 'dashboard-runs-list.png');
  });

  it('shows a run live, follows it, pauses when scrolled up and shows its end', async () => {
    await page.goto(`${server!.url}/ui/pipelines/${encodeURIComponent(PIPELINE)}/runs/${RUN_ID}`);
    const log = page.getByRole('log', { name: 'Run log' });
    await log.waitFor();
    await page.getByTestId('connection-status').getByText('CONNECTED', { exact: true }).waitFor();
    await page.getByTestId('run-status').getByText('running').waitFor();
    // The history arrived and the view followed it to its end.
    await logLine(page, 'line 200').waitFor();
    await waitForScroll(page, (s) => s.scrollTop > 0 && atBottom(s));
    expect(await page.getByTestId('follow-state').textContent()).toBe('Following');

    // Appended over HTTP, the lines appear within a second, and the view follows them.
    const appendedAt = Date.now();
    await postLog(server!, RUN, lines(201, 210));
    await logLine(page, 'line 210').waitFor({ state: 'visible', timeout: 1_000 });
    expect(Date.now() - appendedAt).toBeLessThan(1_000);
    await waitForScroll(page, atBottom);
    expect(await lineInView(page, 'line 210')).toBe(true);
    expect(atBottom(await logScroll(page))).toBe(true);

    // Scrolled up by hand, follow pauses: new lines do not move the view.
    await log.hover();
    await page.mouse.wheel(0, -2_000);
    await page.getByTestId('follow-state').getByText('Paused').waitFor();
    const jump = page.getByRole('button', { name: 'Jump to latest' });
    await jump.waitFor();
    const paused = await logScroll(page);
    expect(atBottom(paused)).toBe(false);
    await postLog(server!, RUN, lines(211, 260));
    await waitForScroll(page, (s) => s.scrollHeight > paused.scrollHeight);
    const after = await logScroll(page);
    expect(after.scrollTop).toBe(paused.scrollTop);
    expect(atBottom(after)).toBe(false);
    expect(await page.getByTestId('follow-state').textContent()).toBe('Paused');
    expect(await logLine(page, 'line 260').count()).toBe(0);

    // Jump to latest: back at the newest line, following again.
    await jump.click();
    await page.getByTestId('follow-state').getByText('Following').waitFor();
    await logLine(page, 'line 260').waitFor();
    await waitForScroll(page, atBottom);
    expect(await lineInView(page, 'line 260')).toBe(true);
    expect(await jump.count()).toBe(0);

    // The run finishes: its status shows success, and the stream ends.
    await putStatus(server!, RUN, 'success');
    await page.getByTestId('run-status').getByText('success', { exact: true }).waitFor();
    await page
      .getByTestId('connection-status')
      .getByText('DISCONNECTED', { exact: true })
      .waitFor();
    expect(await page.getByTestId('connection-status').textContent()).not.toMatch(/\(/);
    await screenshot(page, 'dashboard-run-view.png');
  });

  it('shows an event published to topic iceberg as a row of the Iceberg table', async () => {
    await page.goto(`${server!.url}/ui/topics/iceberg`);
    await page.getByRole('heading', { name: 'Apache Iceberg Real-time Mutations' }).waitFor();
    const table = page.getByRole('table');
    await table.getByText('Waiting for events...').waitFor();
    const response = await sendEvents(server!, '/api/v1/topics/iceberg', [
      { kind: 'iceberg-mutation', id: SEED_EVENT.eventId, data: SEED_EVENT },
    ]);
    expect(response.status, await response.clone().text()).toBe(200);
    const row = table.getByRole('row').filter({ hasText: SEED_EVENT.tableIdentifier });
    await row.waitFor();
    expect(await row.getByRole('cell').allTextContents()).toEqual([
      SEED_EVENT.eventTimestamp,
      SEED_EVENT.tableIdentifier,
      'append',
      '15782093',
    ]);
    expect(await table.getByRole('row').count()).toBe(2);
    await page.getByTestId('connection-status').getByText('CONNECTED', { exact: true }).waitFor();
    await screenshot(page, 'dashboard-iceberg-view.png');
  });
});
