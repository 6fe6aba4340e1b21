import type { Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { httpJson, postLog, putStatus, runPath } from '../helpers/api.js';
import { screenshot, seriousAxeViolations } from '../helpers/browser.js';
import { openDashboard } from '../helpers/dashboard-session.js';
import type { DashboardSession } from '../helpers/dashboard-session.js';
import type { ServerProcess } from '../helpers/server-process.js';

// Searching every run from the dashboard (docs/DASHBOARD.md, "Searching every run") in Debian's
// Chromium against a real `tailwater serve` serving dist/web: the header box, the search page,
// and the run view opened at the hit's line (`#L…`). Needs `npm run build`.

const PIPELINE = 'search.test';
const RUN_ID = 'r1';
const NEEDLE = 'needle-4242';
const TARGET_LINE = 1234;
const LINES = 3000;
const UI_TIMEOUT = 15_000;

/** 3,000 lines, the needle on line 1,234 only. */
function log(): string {
  let text = '';
  for (let n = 1; n <= LINES; n += 1) {
    text +=
      n === TARGET_LINE
        ? `step ${n}: héllo 日本 found ${NEEDLE} in the batch\n`
        : `step ${n}: nothing to see\n`;
  }
  return text;
}

describe('searching every run in Chromium', () => {
  let session: DashboardSession | undefined;
  let server: ServerProcess;
  let page: Page;
  let cspViolations: string[] = [];

  beforeAll(async () => {
    session = await openDashboard(
      'search-browser',
      {
        TAILWATER_POLL_SECONDS: '0.05',
        TAILWATER_SEARCH_INDEX_SECONDS: '0.1',
      },
      UI_TIMEOUT,
    );
    ({ server, page, cspViolations } = session);
  });

  afterEach(() => {
    expect(cspViolations).toEqual([]);
  });

  afterAll(async () => {
    await session?.close();
  });

  it('finds a line from the header box and opens the run at it, centred and highlighted', async () => {
    const run = runPath(PIPELINE, RUN_ID);
    await putStatus(server, run, 'running');
    await postLog(server, run, log());
    await putStatus(server, run, 'success');

    // The index runs behind the appends (docs/SEARCH.md): wait until the API finds the line.
    const deadline = Date.now() + UI_TIMEOUT;
    for (;;) {
      const answer = await httpJson(server, 'GET', `/api/v1/search?q=${NEEDLE}`);
      expect(answer.status).toBe(200);
      const hits = (answer.body as { hits: { line: number | null }[] }).hits;
      if (hits.length > 0) {
        expect(hits.map((hit) => hit.line)).toEqual([TARGET_LINE]);
        break;
      }
      if (Date.now() > deadline) throw new Error('the search never found the line');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }

    await page.goto(`${server.url}/ui/`);
    const box = page.getByRole('searchbox', { name: 'Search all logs' });
    await box.fill(NEEDLE);
    await box.press('Enter');
    await page.waitForURL(`**/ui/search?q=${NEEDLE}`);

    const group = page.getByTestId('search-run');
    await group.waitFor();
    expect(await group.count()).toBe(1);
    expect(await group.getByRole('heading', { level: 2 }).textContent()).toMatch(
      new RegExp(`^${PIPELINE.replace('.', '\\.')} / ${RUN_ID} success started `),
    );
    const hit = group.getByTestId('hit');
    expect(await hit.count()).toBe(1);
    expect(await hit.locator('.hit-line').textContent()).toBe(String(TARGET_LINE));
    expect(await hit.locator('mark').allTextContents()).toEqual([NEEDLE]);
    expect(await hit.getByRole('link').getAttribute('href')).toBe(
      `/ui/pipelines/${PIPELINE}/runs/${RUN_ID}#L${TARGET_LINE}`,
    );
    expect(await seriousAxeViolations(page)).toEqual([]);
    await screenshot(page, 'dashboard-search.png');

    await hit.getByRole('link').click();
    await page.waitForURL(`**/ui/pipelines/${PIPELINE}/runs/${RUN_ID}#L${TARGET_LINE}`);
    const logBox = page.getByTestId('log');
    const target = logBox.locator(`.log-line.line-target[data-line="${TARGET_LINE}"]`);
    await target.waitFor();
    expect(await target.locator('.line-text').textContent()).toContain(NEEDLE);

    // In view and roughly centred: its centre within the middle third of the log's box.
    const centred = async () => {
      const line = await target.boundingBox();
      const view = await logBox.boundingBox();
      if (!line || !view) return false;
      const middle = line.y + line.height / 2;
      return (
        line.y >= view.y &&
        line.y + line.height <= view.y + view.height &&
        middle >= view.y + view.height / 3 &&
        middle <= view.y + (2 * view.height) / 3
      );
    };
    const until = Date.now() + UI_TIMEOUT;
    while (!(await centred())) {
      if (Date.now() > until) throw new Error('the target line is not in the middle of the log');
      await page.waitForTimeout(20);
    }
    // Follow stopped, so it stays there.
    expect(await page.getByTestId('follow-state').textContent()).toBe('Paused');
    await page.waitForTimeout(300);
    expect(await centred()).toBe(true);
    expect(await logBox.locator('.line-target').count()).toBe(1);
    expect(await seriousAxeViolations(page)).toEqual([]);
    await screenshot(page, 'dashboard-search-target-line.png');

    // Another line's address (an edited fragment) moves the same view.
    await page.evaluate("window.location.hash = '#L2900'");
    const other = logBox.locator('.log-line.line-target[data-line="2900"]');
    await other.waitFor();
    expect(await logBox.locator(`.line-target[data-line="${TARGET_LINE}"]`).count()).toBe(0);
  });

  it('live: lines a running run writes while the page is open come in', async () => {
    const run = runPath(PIPELINE, 'r2');
    await putStatus(server, run, 'running');
    await page.goto(`${server.url}/ui/search?q=${NEEDLE}`);
    await page.getByTestId('hit').first().waitFor();
    expect(await page.getByTestId('search-run').count()).toBe(1);

    await postLog(server, run, `first\nlive ${NEEDLE} arrived\nlast\n`);
    // The page asks every 5 s and the index catches up within a fraction of that; the timeout
    // only ends a page that never shows the line, however slow the machine.
    const live = page.getByTestId('search-run').filter({ hasText: `${PIPELINE} / r2` });
    await live.waitFor({ timeout: 60_000 });
    expect(await live.getByTestId('hit').locator('.hit-line').allTextContents()).toEqual(['2']);
    // The newest run comes first, and what was shown stays.
    expect(
      await page
        .getByTestId('search-run')
        .evaluateAll((runs) => runs.map((run) => run.getAttribute('aria-label'))),
    ).toEqual([`${PIPELINE} / r2`, `${PIPELINE} / ${RUN_ID}`]);
  });
});
