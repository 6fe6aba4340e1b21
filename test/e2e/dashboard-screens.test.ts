import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Locator, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postLog, putStatus, runPath, sendEvents } from '../helpers/api.js';
import { launchChromium, screenshot, seriousAxeViolations } from '../helpers/browser.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';

// Every page of the dashboard (runs, pipeline, run, search, topic, sign-in) in Chromium, light
// and dark, at a laptop's 1280×800 and a phone's 390×844: each is saved as a screenshot in
// test-output/ (screens-<page>-<theme>-<width>.png) to be looked at, and each must fit the
// window's width (no sideways scrolling of the page; wide tables and the log scroll in their own
// boxes) and have no serious accessibility violation (contrast included) in either theme.
// Needs `npm run build` and `bash scripts/services.sh` (Chromium).

const PIPELINE = 'screens.etl';
const UI_TIMEOUT = 15_000;
const VIEWPORTS = [
  { width: 1280, height: 800 },
  { width: 390, height: 844 },
] as const;
const THEMES = ['light', 'dark'] as const;

interface Screen {
  name: string;
  path: string;
  /** What shows once the page has its data. */
  ready(page: Page): Locator;
}

const SCREENS: Screen[] = [
  {
    name: 'runs',
    path: '/ui/',
    ready: (page) => page.getByRole('table', { name: 'Pipelines' }),
  },
  {
    name: 'pipeline',
    path: `/ui/pipelines/${PIPELINE}`,
    ready: (page) => page.getByRole('link', { name: 'r-finished', exact: true }).first(),
  },
  {
    name: 'run-finished',
    path: `/ui/pipelines/${PIPELINE}/runs/r-finished`,
    ready: (page) => page.getByTestId('run-ended'),
  },
  {
    name: 'run-live',
    path: `/ui/pipelines/${PIPELINE}/runs/r-live`,
    ready: (page) => page.getByTestId('connection-state').getByText('Live', { exact: true }),
  },
  {
    name: 'search',
    path: '/ui/search?q=checksum',
    ready: (page) => page.getByText('checksum mismatch in block 7').first(),
  },
  {
    name: 'topic',
    path: '/ui/topics/iceberg',
    ready: (page) => page.getByRole('table').getByRole('row').nth(1),
  },
];

async function fill(server: ServerProcess): Promise<void> {
  const finished = runPath(PIPELINE, 'r-finished');
  await putStatus(server, finished, 'running');
  let text = '';
  for (let n = 1; n <= 40; n += 1)
    text += `2026-12-07 10:00:${String(n).padStart(2, '0')} INFO read batch ${n}\n`;
  text += '::group::Install dependencies\nnpm ci\nadded 412 packages in 9s\n::endgroup::\n';
  text += 'WARN slow partition p3\nERROR checksum mismatch in block 7\nretrying block 7\n';
  await postLog(server, finished, text);
  const events = await sendEvents(server, finished, [
    { kind: 'progress', step: 'load', data: { pct: 60 } },
    { kind: 'metric', step: 'load', data: { rows: 120_000, seconds: 4.2 } },
  ]);
  expect(events.status).toBe(200);
  await putStatus(server, finished, 'success');
  const live = runPath(PIPELINE, 'r-live');
  await putStatus(server, live, 'running');
  await postLog(server, live, 'starting\nreading s3://bucket/part-0001\n');
  const commits = await sendEvents(server, '/api/v1/topics/iceberg', [
    { kind: 'commit', data: { table: 'analytics.events', snapshotId: 8231, operation: 'append' } },
  ]);
  expect(commits.status).toBe(200);
}

/** How far the page itself scrolls sideways (px): 0 when it fits the window. */
const overflow = (page: Page) =>
  page.locator('html').evaluate((html) => html.scrollWidth - html.clientWidth);

describe('every dashboard page in both themes, at a laptop’s and a phone’s size', () => {
  const dirs: string[] = [];
  let server: ServerProcess;
  let authServer: ServerProcess;
  let browser: Browser;

  beforeAll(async () => {
    const data = mkdtempSync(join(tmpdir(), 'tailwater-screens-'));
    const authData = mkdtempSync(join(tmpdir(), 'tailwater-screens-auth-'));
    dirs.push(data, authData);
    server = await startServerProcess(['--data', data, '--host', '127.0.0.1'], {
      TAILWATER_FINISH_GRACE_SECONDS: '0.5',
    });
    authServer = await startServerProcess(['--data', authData, '--host', '127.0.0.1'], {
      TAILWATER_AUTH_SECRET: 'screens-secret-of-at-least-32-bytes-long',
    });
    browser = await launchChromium();
    await fill(server);
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await authServer?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  for (const theme of THEMES) {
    for (const viewport of VIEWPORTS) {
      it(`${theme} at ${viewport.width}×${viewport.height}: each page fits the width, has no serious accessibility violation, and is saved`, async () => {
        const context = await browser.newContext({ viewport, colorScheme: theme });
        context.setDefaultTimeout(UI_TIMEOUT);
        try {
          const page = await context.newPage();
          const found: Record<string, unknown> = {};
          for (const screen of SCREENS) {
            await page.goto(`${server.url}${screen.path}`);
            await screen.ready(page).waitFor();
            await screenshot(page, `screens-${screen.name}-${theme}-${viewport.width}.png`);
            found[screen.name] = {
              overflow: await overflow(page),
              violations: await seriousAxeViolations(page),
            };
          }
          await page.goto(`${authServer.url}/ui/`);
          await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
          await screenshot(page, `screens-sign-in-${theme}-${viewport.width}.png`);
          found['sign-in'] = {
            overflow: await overflow(page),
            violations: await seriousAxeViolations(page),
          };
          const clean = { overflow: 0, violations: [] };
          expect(found).toEqual(Object.fromEntries(Object.keys(found).map((k) => [k, clean])));
        } finally {
          await context.close();
        }
      });
    }
  }
});
