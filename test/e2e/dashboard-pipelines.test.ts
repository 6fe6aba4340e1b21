import { setTimeout as delay } from 'node:timers/promises';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postLog, putStatus, runPath } from '../helpers/api.js';
import { screenshot, seriousAxeViolations } from '../helpers/browser.js';
import { openDashboard } from '../helpers/dashboard-session.js';
import type { DashboardSession } from '../helpers/dashboard-session.js';
import type { ServerProcess } from '../helpers/server-process.js';

// The runs list, the pipeline page and its chart, and both themes, in Chromium against a real
// `tailwater serve` serving dist/web (`npm run build` first; never `npx playwright install`).

const PIPELINE = 'nightly.etl';
const OTHER = 'hourly.export';
const RUNS = 60;
const UI_TIMEOUT = 15_000;

const statusOf = (i: number) => (i % 9 === 4 ? 'failed' : 'success');
const runId = (i: number) => `run-${String(i).padStart(2, '0')}`;

const themeOf = (page: Page) => page.locator('html').getAttribute('data-theme');

async function useTheme(page: Page, theme: 'light' | 'dark'): Promise<void> {
  await page.getByRole('combobox', { name: 'Theme' }).selectOption(theme);
  await expect.poll(() => themeOf(page)).toBe(theme);
}

describe('pipelines and themes in Chromium', () => {
  let session: DashboardSession | undefined;
  let server: ServerProcess;
  let page: Page;
  let cspViolations: string[] = [];

  beforeAll(async () => {
    session = await openDashboard(
      'pipelines',
      {
        TAILWATER_POLL_SECONDS: '0.05',
        TAILWATER_FINISH_GRACE_SECONDS: '0.5',
      },
      UI_TIMEOUT,
    );
    ({ server, page, cspViolations } = session);
    // 60 runs, each running for a while of its own, so the bars differ.
    for (let i = 1; i <= RUNS; i += 1) {
      const run = runPath(PIPELINE, runId(i));
      await putStatus(server, run, 'running');
      await postLog(server, run, `step ${i}\n`);
      await delay((i % 5) * 30 + 10);
      await putStatus(server, run, statusOf(i));
    }
    await putStatus(server, runPath(OTHER, 'x1'), 'success');
  }, 120_000);

  afterAll(async () => {
    await session?.close();
  });

  it("the pipeline page charts the newest 50 runs' durations, a bar each, drawn in its run's status", async () => {
    await page.goto(`${server.url}/ui/pipelines/${encodeURIComponent(PIPELINE)}`);
    const chart = page.getByTestId('duration-chart');
    await chart.locator('canvas').waitFor();
    await expect.poll(() => chart.getAttribute('data-bars')).toBe('50');
    // Left to right, oldest first: runs 11 … 60.
    const expected = Array.from({ length: 50 }, (_, k) => statusOf(k + 11));
    expect((await chart.getAttribute('data-bar-statuses'))!.split(' ')).toEqual(expected);
    const table = page.getByRole('table', { name: `Runs of ${PIPELINE}` });
    expect(await table.getByRole('rowheader').count()).toBe(50);
    expect(await table.getByRole('rowheader').first().textContent()).toBe(runId(60));
    await page.getByRole('button', { name: 'Older runs' }).click();
    await table.getByRole('rowheader', { name: runId(10) }).waitFor();
    expect(await table.getByRole('rowheader').count()).toBe(10);
    await page.getByRole('button', { name: 'Newer runs' }).click();
    await table.getByRole('rowheader', { name: runId(60) }).waitFor();
    expect(cspViolations).toEqual([]);
  });

  it('filters the pipeline page by status', async () => {
    await page.getByRole('combobox', { name: 'Status' }).selectOption('failed');
    const table = page.getByRole('table', { name: `Runs of ${PIPELINE}` });
    await table.getByRole('rowheader', { name: runId(4) }).waitFor();
    const failed = Array.from({ length: RUNS }, (_, k) => k + 1)
      .filter((i) => statusOf(i) === 'failed')
      .reverse()
      .map(runId);
    await expect.poll(() => table.getByRole('rowheader').count()).toBe(failed.length);
    expect(await table.getByRole('rowheader').allTextContents()).toEqual(failed);
    expect(await page.getByTestId('duration-chart').getAttribute('data-bars')).toBe(
      String(failed.length),
    );
    await page.getByRole('button', { name: 'Clear filters' }).click();
    await table.getByRole('rowheader', { name: runId(60) }).waitFor();
  });

  it('shows a run that starts while the page is open, live, and its end', async () => {
    const run = runPath(PIPELINE, 'live-1');
    await putStatus(server, run, 'running');
    const table = page.getByRole('table', { name: `Runs of ${PIPELINE}` });
    const row = table.getByRole('row').filter({ has: page.getByRole('link', { name: 'live-1' }) });
    await row.getByText('running', { exact: true }).waitFor();
    expect(await table.getByRole('rowheader').first().textContent()).toBe('live-1');
    const elapsed = row.getByTestId('elapsed');
    const before = await elapsed.textContent();
    await expect.poll(() => elapsed.textContent()).not.toBe(before);
    await putStatus(server, run, 'success');
    await row.getByText('success', { exact: true }).waitFor();
    expect(await row.getByTestId('elapsed').count()).toBe(0);
  });

  it('names the run under the pointer in the chart, and opens it on a click', async () => {
    const over = page.getByTestId('duration-chart').locator('.u-over');
    const box = (await over.boundingBox())!;
    // The rightmost bar is the newest run: live-1.
    await page.mouse.move(box.x + box.width - 2, box.y + box.height / 2);
    const hover = page.getByTestId('chart-hover');
    await hover.getByRole('link', { name: 'live-1' }).waitFor();
    expect(await hover.textContent()).toMatch(/^live-1 · success · \d+s$/);
    await page.mouse.click(box.x + box.width - 2, box.y + box.height / 2);
    await page.getByRole('log', { name: 'Run log' }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/ui/pipelines/${PIPELINE}/runs/live-1`);
  });

  it('the runs list filters pipelines by name on the server, and links each to its page', async () => {
    await page.goto(`${server.url}/ui/`);
    const table = page.getByRole('table', { name: 'Pipelines' });
    await table.getByRole('link', { name: OTHER }).waitFor();
    await page.getByRole('searchbox', { name: 'Pipeline' }).fill('nightly');
    await expect.poll(() => table.getByRole('rowheader').count()).toBe(1);
    const link = table.getByRole('link', { name: PIPELINE, exact: true });
    expect(await link.getAttribute('href')).toBe(`/ui/pipelines/${PIPELINE}`);
    const started = table.locator('time').first();
    expect(await started.getAttribute('datetime')).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(await started.textContent()).toMatch(/ago$|^just now$/);
    await link.click();
    await page.getByRole('heading', { level: 1, name: PIPELINE }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/ui/pipelines/${PIPELINE}`);
  });

  it('follows the system theme, and keeps the one chosen in the top bar across reloads', async () => {
    await page.emulateMedia({ colorScheme: 'dark' });
    await page.goto(`${server.url}/ui/`);
    await page.getByRole('table', { name: 'Pipelines' }).waitFor();
    expect(await themeOf(page)).toBe('dark');
    await page.emulateMedia({ colorScheme: 'light' });
    await expect.poll(() => themeOf(page)).toBe('light');
    await useTheme(page, 'dark');
    await page.reload();
    await page.getByRole('table', { name: 'Pipelines' }).waitFor();
    expect(await themeOf(page)).toBe('dark');
    const background = await page
      .locator('html')
      .evaluate((el) => el.ownerDocument.defaultView?.getComputedStyle(el).backgroundColor);
    expect(background).toBe('rgb(13, 17, 23)');
    await page.getByRole('combobox', { name: 'Theme' }).selectOption('system');
    await expect.poll(() => themeOf(page)).toBe('light');
  });

  it('fits a 390 px window: the page itself never scrolls sideways', async () => {
    await page.setViewportSize({ width: 390, height: 800 });
    try {
      for (const path of ['/ui/', `/ui/pipelines/${PIPELINE}`]) {
        await page.goto(`${server.url}${path}`);
        await page.getByRole('table').first().waitFor();
        const widths = await page
          .locator('html')
          .evaluate((el) => ({ scroll: el.scrollWidth, client: el.clientWidth }));
        expect(widths.scroll, path).toBeLessThanOrEqual(widths.client);
      }
      await screenshot(page, 'dashboard-pipeline-narrow.png');
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
  });

  it('passes axe-core in light and in dark on the runs list, the pipeline page and a run view', async () => {
    const run = runPath(PIPELINE, 'a11y');
    await putStatus(server, run, 'running');
    await postLog(server, run, '\u001b[32mINFO\u001b[0m ready\n\u001b[31mWARN\u001b[0m slow\n');
    const views: [string, string, () => Promise<void>][] = [
      [
        'runs-list',
        '/ui/',
        () => page.getByRole('table', { name: 'Pipelines' }).getByRole('row').nth(2).waitFor(),
      ],
      [
        'pipeline',
        `/ui/pipelines/${PIPELINE}`,
        async () => {
          await page.getByTestId('duration-chart').locator('canvas').waitFor();
          await page.getByRole('table', { name: `Runs of ${PIPELINE}` }).waitFor();
        },
      ],
      [
        'run-view',
        `/ui/pipelines/${PIPELINE}/runs/a11y`,
        () => page.getByRole('log', { name: 'Run log' }).getByText('WARN').waitFor(),
      ],
    ];
    for (const theme of ['light', 'dark'] as const) {
      for (const [name, path, ready] of views) {
        await page.goto(`${server.url}${path}`);
        await useTheme(page, theme);
        await ready();
        expect(await seriousAxeViolations(page), `${path} in ${theme}`).toEqual([]);
        await screenshot(page, `dashboard-${name}-${theme}.png`);
      }
    }
    expect(cspViolations).toEqual([]);
  });
});
