/**
 * Dashboard: a run with a large log (100 MB by default) opened in the run view, in Debian's
 * Chromium driven by playwright-core. How long until the last line is on screen, how much of the
 * page's heap it takes, how many rows are in the DOM, how smoothly it scrolls, and how long a
 * search takes, against a baseline page on the same origin that only fetches the log as text
 * (`log.txt`) and splits it into lines: the least any browser view of the log must do.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BrowserContext, CDPSession, Page } from 'playwright-core';
import { launchChromium } from '../test/helpers/browser.js';
import { startTailwater } from './procs.js';
import { fmt, median, writeSection } from './report.js';
import type { Row } from './report.js';

const LOG_MB = Number(process.env['BENCH_DASHBOARD_MB'] ?? 100);
const PIPELINE = 'bench.dashboard';
const RUN_ID = 'big';
const POST_BYTES = 4 * 1024 * 1024;
/** Times the run view is opened; the median is reported. */
const LOADS = 3;
const LOAD_TIMEOUT_MS = 180_000;
/** A `#L` link not highlighted by then counts as failed. */
const LINK_TIMEOUT_MS = 30_000;
/** Scroll steps of the flick, one per animation frame. */
const SCROLL_FRAMES = 180;
const SCROLL_STEP_PX = 600;
const FRAME_BUDGET_MS = 1000 / 60;

// Runs in the page, inside evaluate(); this file is type-checked without the DOM's types.
declare const requestAnimationFrame: (callback: (now: number) => void) => number;

const RED = '\u001b[31m';
const RESET = '\u001b[0m';

function logLine(n: number): string {
  const level = n % 10 === 0 ? `${RED}WARN${RESET}` : 'INFO';
  return `2026-11-29T12:00:00.000Z ${level} [transform] line ${n}: processed a batch of rows from the source table\n`;
}

/** Appends about LOG_MB of log lines to the run; returns the number of lines. */
async function fillLog(server: string): Promise<number> {
  const url = `${server}/api/v1/pipelines/${PIPELINE}/runs/${RUN_ID}/logs`;
  const target = LOG_MB * 1024 * 1024;
  let written = 0;
  let n = 0;
  while (written < target) {
    let chunk = '';
    while (chunk.length < POST_BYTES && written + chunk.length < target) chunk += logLine(++n);
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'text/plain; charset=utf-8' },
      body: chunk,
    });
    if (!response.ok) throw new Error(`append: ${response.status} ${await response.text()}`);
    written += Buffer.byteLength(chunk);
  }
  return n;
}

/** The page's V8 heap in use after a full collection, in MiB. */
async function heapMiB(cdp: CDPSession): Promise<number> {
  await cdp.send('HeapProfiler.collectGarbage');
  const { usedSize } = await cdp.send('Runtime.getHeapUsage');
  return usedSize / 1024 / 1024;
}

interface Baseline {
  loadMs: number;
  heapMiB: number;
  searchMs: number;
}

/** Fetches log.txt, splits it into lines and keeps them; then a plain search over them. */
async function measureBaseline(page: Page, server: string, query: string): Promise<Baseline> {
  await page.goto(`${server}/ui/`);
  const cdp = await page.context().newCDPSession(page);
  const loadMs = await page.evaluate(async (url) => {
    const started = performance.now();
    const text = await (await fetch(url)).text();
    (globalThis as { benchLines?: string[] }).benchLines = text.split('\n');
    return performance.now() - started;
  }, `${server}/api/v1/pipelines/${PIPELINE}/runs/${RUN_ID}/log.txt`);
  const heap = await heapMiB(cdp);
  const searchMs = await page.evaluate((q) => {
    const lines = (globalThis as { benchLines?: string[] }).benchLines ?? [];
    const started = performance.now();
    const needle = q.toLowerCase();
    let found = 0;
    for (const line of lines) if (line.toLowerCase().includes(needle)) found += 1;
    if (found !== 1) throw new Error(`baseline search found ${found}`);
    return performance.now() - started;
  }, query);
  await cdp.detach();
  return { loadMs, heapMiB: heap, searchMs };
}

interface Dashboard {
  /** Each opening's time to the last line, ms. */
  loads: number[];
  heapMiB: number;
  rows: number;
  frames: number[];
  searchMs: number;
}

/** Opens the run view and waits for its last line; the time it took, in ms. */
async function openRunView(page: Page, server: string, lines: number): Promise<number> {
  const started = performance.now();
  await page.goto(`${server}/ui/pipelines/${PIPELINE}/runs/${RUN_ID}`);
  // Follow mode: the last line is rendered once the whole log has arrived.
  try {
    await page.waitForSelector(`.log-line[data-index="${lines - 1}"]`, {
      state: 'attached',
      timeout: LOAD_TIMEOUT_MS,
    });
  } catch (error) {
    const state = await page.getByTestId('connection-state').textContent();
    const last = await page.locator('.log-line').last().getAttribute('data-index');
    throw new Error(`the run view did not reach line ${lines} (at ${last}, ${state})`, {
      cause: error,
    });
  }
  return performance.now() - started;
}

/** The line a `#L` link points at, about two thirds into the log (as a colleague's link might). */
const linkTarget = (lines: number) => Math.floor((lines * 2) / 3);

/** Opens a fresh tab at `#L<n>` and waits for line n highlighted; the time it took, in ms. */
async function openLineLink(
  context: BrowserContext,
  server: string,
  line: number,
): Promise<number> {
  const page = await context.newPage();
  try {
    // The tab in front, as one a colleague's link opens: a tab behind the run view left open
    // before it is one nobody looks at, and Chromium does not lay it out.
    await page.bringToFront();
    const started = performance.now();
    await page.goto(`${server}/ui/pipelines/${PIPELINE}/runs/${RUN_ID}#L${line}`);
    try {
      await page
        .locator(`.log-line[data-line="${line}"]`)
        .and(page.locator('.line-target'))
        .waitFor({ state: 'visible', timeout: LINK_TIMEOUT_MS });
    } catch {
      // Reported, not thrown: the view sometimes never goes to the line (an open bug).
      return Number.NaN;
    }
    return performance.now() - started;
  } finally {
    await page.close();
  }
}

async function measureDashboard(
  context: BrowserContext,
  server: string,
  lines: number,
  query: string,
): Promise<Dashboard> {
  // Opened LOADS times, each in a fresh tab; the last one stays for the other measurements.
  const loads: number[] = [];
  let opened: Page | undefined;
  for (let n = 0; n < LOADS; n += 1) {
    await opened?.close();
    opened = await context.newPage();
    loads.push(await openRunView(opened, server, lines));
  }
  const page = opened!;
  const cdp = await page.context().newCDPSession(page);
  const heap = await heapMiB(cdp);
  await cdp.detach();
  const rows = await page.locator('.log-line').count();

  // A fast flick upwards, one step per frame; the gaps between frames say how smooth it was.
  const frames = await page.getByTestId('log').evaluate(
    (log, { steps, step }) =>
      new Promise<number[]>((resolve) => {
        const gaps: number[] = [];
        let last = performance.now();
        let done = 0;
        const tick = (now: number) => {
          gaps.push(now - last);
          last = now;
          log.scrollTop -= step;
          done += 1;
          if (done < steps) requestAnimationFrame(tick);
          else resolve(gaps.slice(1));
        };
        requestAnimationFrame(tick);
      }),
    { steps: SCROLL_FRAMES, step: SCROLL_STEP_PX },
  );

  const searchStarted = performance.now();
  await page.getByRole('searchbox', { name: 'Search the log' }).fill(query);
  await page
    .getByTestId('search-count')
    .getByText('1 of 1', { exact: true })
    .waitFor({ timeout: LOAD_TIMEOUT_MS });
  const searchMs = performance.now() - searchStarted;
  return { loads, heapMiB: heap, rows, frames, searchMs };
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

export async function benchDashboard(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'tailwater-bench-dashboard-'));
  const server = await startTailwater(dir);
  const browser = await launchChromium();
  try {
    const lines = await fillLog(server.url);
    const query = `line ${lines - 7}:`;
    console.log(`dashboard: ${lines.toLocaleString('en-US')} lines (${LOG_MB} MB) written`);
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    // tsx compiles this file with esbuild's keepNames, which wraps named functions in the code
    // handed to evaluate() in calls to a `__name` helper that only exists in Node.
    await context.addInitScript({ content: 'globalThis.__name = (fn) => fn;' });
    const baseline = await measureBaseline(await context.newPage(), server.url, query);
    console.log(`dashboard: baseline ${JSON.stringify(baseline)}`);
    const measured = await measureDashboard(context, server.url, lines, query);
    const loadMs = median(measured.loads);
    const linkLoads: number[] = [];
    for (let n = 0; n < LOADS; n += 1) {
      linkLoads.push(await openLineLink(context, server.url, linkTarget(lines)));
    }
    const linked = linkLoads.filter((ms) => !Number.isNaN(ms));
    const linkMs = median(linked);
    const { frames } = measured;
    console.log(
      `dashboard: run view loaded in ${measured.loads.map((ms) => fmt(ms)).join(', ')} ms, heap ${fmt(measured.heapMiB)} MiB`,
    );

    const rows: Row[] = [
      {
        name: `baseline: fetch log.txt (${LOG_MB} MB) and split it into lines`,
        value: `${fmt(baseline.loadMs / 1000)} s`,
        ratio: '1.0 ×',
        note: `${lines.toLocaleString('en-US')} lines`,
      },
      {
        name: `run view: open → last line on screen (history as log.txt ranges, then the stream; following), median of ${LOADS}`,
        value: `${fmt(loadMs / 1000)} s`,
        ratio: `${fmt(loadMs / baseline.loadMs)} ×`,
        note: `each: ${measured.loads.map((ms) => `${fmt(ms / 1000)} s`).join(', ')}; pages of 64 MiB read as they arrive and split into lines piece by piece, the next asked for at the last one's headers, and rendering`,
      },
      {
        name: `run view: open a \`#L${linkTarget(lines).toLocaleString('en-US')}\` link → that line highlighted, median of ${LOADS}`,
        value: `${fmt(linkMs / 1000)} s`,
        ratio: `${fmt(linkMs / baseline.loadMs)} ×`,
        note: `each: ${linkLoads.map((ms) => (Number.isNaN(ms) ? 'not highlighted within 30 s' : `${fmt(ms / 1000)} s`)).join(', ')}; a fresh tab; the line's place from \`log.txt?lines=\`, the 4,000 lines around it read first, then the rest; goal (issue #18): ≤ 2 s for a line of a log of a million lines`,
      },
      {
        name: 'baseline: page heap holding the lines',
        value: `${fmt(baseline.heapMiB)} MiB`,
        ratio: '1.0 ×',
        note: 'after a full collection (CDP); Blink hands a fetched text to V8 as an external string, outside this figure, so it counts the line slices only',
      },
      {
        name: 'run view: page heap',
        value: `${fmt(measured.heapMiB)} MiB`,
        ratio: `${fmt(measured.heapMiB / baseline.heapMiB)} ×`,
        note: "after a full collection, the whole app included: the pages of text (fetched, so external strings like the baseline's) and the line offsets (typed arrays, whose backing stores are outside this figure too) are not in it",
      },
      {
        name: 'run view: log rows in the DOM',
        value: String(measured.rows),
        note: `of ${lines.toLocaleString('en-US')} lines`,
      },
      {
        name: `run view: flick scroll, ${SCROLL_FRAMES} frames of ${SCROLL_STEP_PX} px — frame gap p50 / p99 / max`,
        value: `${fmt(median(frames))} / ${fmt(percentile(frames, 99))} / ${fmt(Math.max(...frames))} ms`,
        ratio: `${fmt(percentile(frames, 99) / FRAME_BUDGET_MS)} × (p99 / 16.7 ms)`,
        note: `${frames.filter((gap) => gap > FRAME_BUDGET_MS * 1.5).length} frames over 25 ms`,
      },
      {
        name: 'baseline: search the lines (toLowerCase + includes)',
        value: `${fmt(baseline.searchMs)} ms`,
        ratio: '1.0 ×',
      },
      {
        name: 'run view: type a query → "1 of 1" shown',
        value: `${fmt(measured.searchMs)} ms`,
        ratio: `${fmt(measured.searchMs / baseline.searchMs)} ×`,
        note: 'escape codes stripped per line, a RegExp per line, then render',
      },
    ];
    writeSection(
      'dashboard',
      'Dashboard: a large log in the run view',
      `A run with a ${LOG_MB} MB log (lines of ~100 B, one in ten with an ANSI colour) opened in the dashboard's run view in Debian's Chromium (headless, driven by playwright-core), from a real \`tailwater serve\` on loopback. The baseline is a page on the same origin that fetches the whole log as text (\`log.txt\`) and splits it into lines, the least a browser view of the log must do. Scroll smoothness is a flick upwards of ${SCROLL_FRAMES} animation frames, ${SCROLL_STEP_PX} px each. Both pages are timed with DevTools' network agent on (playwright-core enables it in every page), which copies and decodes every response under its size limit: a user has no such cost. It made the run view's pages of 16 MiB cost twice a 64 MiB one per byte (measured), the 100 MB baseline not at all; without it (Chromium driven over a bare CDP pipe, measured once by hand) the run view took 1.07–1.25 × the baseline where this table's method gave 1.30–1.43 ×.`,
      rows,
    );
    await context.close();
  } finally {
    await browser.close();
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
