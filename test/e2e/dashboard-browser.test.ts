import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { postLog, putStatus, runPath, sendEvents } from '../helpers/api.js';
import { screenshot, seriousAxeViolations } from '../helpers/browser.js';
import { openDashboard } from '../helpers/dashboard-session.js';
import type { DashboardSession } from '../helpers/dashboard-session.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { SEED_ICEBERG_EVENT } from '../helpers/fixtures.js';

// The dashboard in a real browser (Debian's Chromium, driven by playwright-core) against a
// real `tailwater serve` serving dist/web. Needs `npm run build` and `bash scripts/services.sh`
// (which installs /usr/bin/chromium); never `npx playwright install`.

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

describe('the dashboard in Chromium', () => {
  let session: DashboardSession | undefined;
  let server: ServerProcess;
  let page: Page;
  let cspViolations: string[] = [];

  beforeAll(async () => {
    session = await openDashboard(
      'browser',
      {
        TAILWATER_POLL_SECONDS: '0.05',
        TAILWATER_FINISH_GRACE_SECONDS: '0.5',
      },
      UI_TIMEOUT,
    );
    ({ server, page, cspViolations } = session);
    expect(new URL(server.url).hostname).toBe('127.0.0.1');
  });

  afterEach(() => {
    // Served with its Content-Security-Policy, the dashboard does all it does without a violation.
    expect(cspViolations).toEqual([]);
  });

  afterAll(async () => {
    await session?.close();
  });

  it('lists the pipelines and their runs', async () => {
    await putStatus(server, RUN, 'running');
    await postLog(server, RUN, lines(1, 200));
    await page.goto(`${server.url}/ui/`);
    const table = page.getByRole('table', { name: 'Pipelines' });
    await table.getByRole('link', { name: PIPELINE, exact: true }).waitFor();
    await table.getByRole('link', { name: RUN_ID }).waitFor();
    await page.getByTestId('connection-state').getByText('Live', { exact: true }).waitFor();
    await screenshot(page, 'dashboard-runs-list.png');
  });

  it('shows a run live, follows it, pauses when scrolled up and shows its end', async () => {
    await page.goto(`${server.url}/ui/pipelines/${encodeURIComponent(PIPELINE)}/runs/${RUN_ID}`);
    const log = page.getByRole('log', { name: 'Run log' });
    await log.waitFor();
    await page.getByTestId('connection-state').getByText('Live', { exact: true }).waitFor();
    await page.getByTestId('run-status').getByText('running').waitFor();
    // The history arrived and the view followed it to its end.
    await logLine(page, 'line 200').waitFor();
    await waitForScroll(page, (s) => s.scrollTop > 0 && atBottom(s));
    expect(await page.getByTestId('follow-state').textContent()).toBe('Following');

    // Appended over HTTP, the lines appear without a reload (pushed: how soon is
    // `npm run bench -- dashboard`'s to measure), and the view follows them.
    await postLog(server, RUN, lines(201, 210));
    await logLine(page, 'line 210').waitFor({ state: 'visible', timeout: 10_000 });
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
    await postLog(server, RUN, lines(211, 260));
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

    // The run finishes: its status shows success, the header its end and duration, and the
    // stream's state ("Live") goes once it has ended.
    await putStatus(server, RUN, 'success');
    await page.getByTestId('run-status').getByText('success', { exact: true }).waitFor();
    await page
      .getByTestId('run-ended')
      .getByText(/^Ended .+ · took \d/)
      .waitFor();
    await page.getByTestId('connection-state').waitFor({ state: 'detached' });
    await screenshot(page, 'dashboard-run-view.png');
  });

  it('finds text in the log, shows the match, and stays usable in a narrow window', async () => {
    await page.goto(`${server.url}/ui/pipelines/${encodeURIComponent(PIPELINE)}/runs/${RUN_ID}`);
    await logLine(page, 'line 260').waitFor();
    const search = page.getByRole('searchbox', { name: 'Search the log' });
    await search.fill('line 42');
    await page.getByTestId('search-count').getByText('1 of 1', { exact: true }).waitFor();
    // The view left the bottom to show line 42, marked.
    await page.getByTestId('follow-state').getByText('Paused').waitFor();
    const mark = page.getByRole('log', { name: 'Run log' }).locator('mark.match-active');
    await mark.waitFor();
    expect(await mark.textContent()).toBe('line 42');
    expect(await lineInView(page, 'line 42')).toBe(true);
    await search.press('Escape');
    await expect.poll(() => mark.count(), { timeout: 5_000 }).toBe(0);
    expect(await search.inputValue()).toBe('');

    // A phone-sized window: nothing is cut off sideways, and the log still fills the width.
    await page.setViewportSize({ width: 390, height: 800 });
    try {
      const widths = await page.locator('html').evaluate((html) => ({
        page: html.scrollWidth,
        viewport: html.clientWidth,
      }));
      expect(widths.page).toBeLessThanOrEqual(widths.viewport);
      const logBox = await page.getByTestId('log').boundingBox();
      expect(logBox!.width).toBeGreaterThan(300);
      await screenshot(page, 'dashboard-run-view-narrow.png');
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it('shows an event published to topic iceberg as a row of the Iceberg table', async () => {
    await page.goto(`${server.url}/ui/topics/iceberg`);
    await page.getByRole('heading', { name: 'Apache Iceberg Real-time Mutations' }).waitFor();
    const table = page.getByRole('table');
    await table.getByText('Waiting for events...').waitFor();
    const response = await sendEvents(server, '/api/v1/topics/iceberg', [
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

  it('passes axe-core on every view: no serious or critical accessibility violation', async () => {
    const run = runPath(PIPELINE, 'a11y');
    await putStatus(server, run, 'running');
    await postLog(server, run, '\u001b[32mINFO\u001b[0m ready\n\u001b[31mWARN\u001b[0m slow\n');
    const events = await sendEvents(server, run, [
      { kind: 'progress', step: 'load', data: { pct: 40 } },
      { kind: 'metric', step: 'load', data: { rows: 12 } },
    ]);
    expect(events.status).toBe(200);
    const views: [string, () => Promise<void>][] = [
      [
        '/ui/',
        () =>
          page
            .getByRole('table', { name: 'Pipelines' })
            .getByRole('link', { name: PIPELINE, exact: true })
            .waitFor(),
      ],
      [
        `/ui/pipelines/${PIPELINE}/runs/a11y`,
        async () => {
          await page.getByRole('progressbar', { name: 'Run progress' }).waitFor();
          await logLine(page, 'WARN slow').waitFor();
          // With a search showing its marks, and follow paused.
          await page.getByRole('searchbox', { name: 'Search the log' }).fill('slow');
          await page.locator('mark.match-active').waitFor();
        },
      ],
      ['/ui/topics/iceberg', () => page.getByRole('table').getByRole('row').nth(1).waitFor()],
    ];
    for (const [path, ready] of views) {
      await page.goto(`${server.url}${path}`);
      await ready();
      expect(await seriousAxeViolations(page), path).toEqual([]);
    }
  });
});
