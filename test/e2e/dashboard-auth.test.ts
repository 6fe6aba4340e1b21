import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { runPath } from '../helpers/api.js';
import {
  checkBrowserPrerequisites,
  launchChromium,
  screenshot,
  seriousAxeViolations,
  watchCspViolations,
} from '../helpers/browser.js';
import { startServerProcess } from '../helpers/server-process.js';
import type { ServerProcess } from '../helpers/server-process.js';

// The dashboard's sign-in (docs/DASHBOARD.md, "Signing in") in Debian's Chromium, driven by
// playwright-core, against a real `tailwater serve` with authentication on (TAILWATER_AUTH_SECRET)
// serving dist/web. Needs `npm run build` and /usr/bin/chromium; never `npx playwright install`.

const SECRET = 'a-dashboard-e2e-secret-of-more-than-thirty-two-bytes';
const KEY = new TextEncoder().encode(SECRET);
const PIPELINE = 'dash.auth';
const SECRET_PIPELINE = 'secret.pipe';
const UI_TIMEOUT = 15_000;

interface Claim {
  read?: string[];
  write?: string[];
  admin?: boolean;
}

/** A token as `tailwater token` mints it (HS256, the `tailwater` claim), valid `ttlSeconds`. */
function mint(claim: Claim, ttlSeconds: number, subject?: string): Promise<string> {
  let jwt = new SignJWT({ tailwater: claim })
    .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
    .setIssuedAt()
    .setExpirationTime(Math.floor(Date.now() / 1000) + ttlSeconds);
  if (subject) jwt = jwt.setSubject(subject);
  return jwt.sign(KEY);
}

const lines = (from: number, to: number): string => {
  let text = '';
  for (let n = from; n <= to; n += 1) text += `line ${n}\n`;
  return text;
};
const lineList = (from: number, to: number): string[] =>
  Array.from({ length: to - from + 1 }, (_, i) => `line ${from + i}`);

describe('signing in to the dashboard in Chromium', () => {
  let server: ServerProcess | undefined;
  let browser: Browser | undefined;
  let dataDir: string;
  let admin: string;
  let viewer: string;
  const contexts: BrowserContext[] = [];
  let cspViolations: string[] = [];

  /** Writes as a producer with an admin token; expects 2xx. */
  async function write(method: string, path: string, body: string, type = 'application/json') {
    const response = await fetch(`${server!.url}${path}`, {
      method,
      headers: { authorization: `Bearer ${admin}`, 'content-type': type },
      body,
    });
    expect(response.status, await response.clone().text()).toBeLessThan(300);
  }
  const setStatus = (pipeline: string, runId: string, status: string) =>
    write('PUT', runPath(pipeline, runId), JSON.stringify({ status }));
  const appendLog = (pipeline: string, runId: string, text: string) =>
    write('POST', `${runPath(pipeline, runId)}/logs`, text, 'text/plain; charset=utf-8');

  /** A page in a fresh context: no cookie. */
  async function freshPage(): Promise<{ context: BrowserContext; page: Page }> {
    const context = await browser!.newContext({ viewport: { width: 1280, height: 800 } });
    contexts.push(context);
    context.setDefaultTimeout(UI_TIMEOUT);
    const page = await context.newPage();
    cspViolations = watchCspViolations(page);
    return { context, page };
  }

  async function signIn(page: Page, token: string, scope: Page | Locator) {
    await scope.getByLabel('Token').fill(token);
    await scope.getByRole('button', { name: 'Sign in' }).click();
  }

  /** The text of every log row in the DOM, in order (the log is short: all of it is rendered). */
  const logLines = (page: Page) =>
    page
      .getByRole('log', { name: 'Run log' })
      .locator('.line-text')
      .evaluateAll((rows) => rows.map((row) => row.textContent ?? ''));

  const sessionStatus = (page: Page) =>
    page.evaluate(async () => (await fetch('/api/v1/session')).status);

  beforeAll(async () => {
    checkBrowserPrerequisites();
    dataDir = mkdtempSync(join(tmpdir(), 'tailwater-dashboard-auth-'));
    server = await startServerProcess(['--data', dataDir, '--host', '127.0.0.1'], {
      TAILWATER_AUTH_SECRET: SECRET,
      TAILWATER_POLL_SECONDS: '0.05',
      TAILWATER_FINISH_GRACE_SECONDS: '0.5',
    });
    expect(new URL(server.url).hostname).toBe('127.0.0.1');
    admin = await mint({ admin: true }, 3600, 'producer');
    viewer = await mint({ read: [`pipeline:dash.*`] }, 3600, 'viewer');
    browser = await launchChromium();
  });

  afterEach(async () => {
    // Served with its Content-Security-Policy, the sign-in needs nothing its policy forbids.
    expect(cspViolations).toEqual([]);
    for (const context of contexts.splice(0)) await context.close();
  });

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  it('asks for a token at /ui/, shows a refusal, lists the runs once signed in, and signs out', async () => {
    await setStatus(PIPELINE, 'r1', 'running');
    await appendLog(PIPELINE, 'r1', lines(1, 3));
    const { context, page } = await freshPage();
    await page.goto(`${server!.url}/ui/`);

    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    const field = page.getByLabel('Token');
    expect(await field.getAttribute('type')).toBe('password');
    expect(await field.evaluate((element) => element === element.ownerDocument.activeElement)).toBe(
      true,
    );
    expect(await page.getByRole('main').textContent()).toContain('tailwater token');
    expect(await page.title()).toBe('Sign in · Tailwater');
    expect(await seriousAxeViolations(page)).toEqual([]);
    await screenshot(page, 'dashboard-sign-in.png');

    // A bad token: the server's reason, announced, and still signed out.
    await signIn(page, 'not-a-token', page);
    await page.getByRole('alert').getByText('The token is not accepted: malformed.').waitFor();
    expect(await field.getAttribute('aria-invalid')).toBe('true');
    expect(await sessionStatus(page)).toBe(401);

    // A good one: the runs list, and who is signed in.
    await signIn(page, viewer, page);
    await page
      .getByRole('table', { name: 'Pipelines' })
      .getByRole('link', { name: PIPELINE, exact: true })
      .waitFor();
    await page.getByRole('link', { name: 'r1' }).waitFor();
    await page.getByTestId('connection-state').getByText('Live', { exact: true }).waitFor();
    expect(await page.getByTestId('signed-in-as').textContent()).toBe('Signed in as viewer');
    // The token is in an HttpOnly, SameSite=Strict cookie, out of the page's script's reach.
    const cookie = (await context.cookies()).find((c) => c.name === 'tailwater_token');
    expect(cookie).toMatchObject({ value: viewer, httpOnly: true, sameSite: 'Strict' });
    expect(
      await page.evaluate(
        () => (globalThis as unknown as { document: { cookie: string } }).document.cookie,
      ),
    ).not.toContain(viewer);
    expect(await sessionStatus(page)).toBe(200);
    await screenshot(page, 'dashboard-signed-in.png');

    // Sign out: back to the sign-in page, the cookie gone.
    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
    await page.getByRole('status').getByText('You signed out.').waitFor();
    expect((await context.cookies()).some((c) => c.name === 'tailwater_token')).toBe(false);
    expect(await sessionStatus(page)).toBe(401);
    await page.reload();
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();
  });

  it('says "not allowed" on the run page of a pipeline the token may not read', async () => {
    await setStatus(SECRET_PIPELINE, 'r1', 'running');
    await appendLog(SECRET_PIPELINE, 'r1', 'classified\n');
    const { page } = await freshPage();
    await page.goto(`${server!.url}/ui/pipelines/${SECRET_PIPELINE}/runs/r1`);
    await signIn(page, viewer, page);
    // The page asked for, after the sign-in: refused by the server (403), said plainly.
    const notAllowed = page.getByTestId('not-allowed');
    await notAllowed.getByRole('heading', { name: 'You are not allowed to see this' }).waitFor();
    expect(await notAllowed.textContent()).toContain(`may not read pipeline ${SECRET_PIPELINE}`);
    expect(await page.getByRole('heading', { level: 1 }).textContent()).toBe(
      `${SECRET_PIPELINE} / r1`,
    );
    expect(await page.getByRole('log', { name: 'Run log' }).count()).toBe(0);
    expect(await page.getByText('classified').count()).toBe(0);
    expect(await page.getByRole('dialog').count()).toBe(0);
    expect(await seriousAxeViolations(page)).toEqual([]);
    await screenshot(page, 'dashboard-not-allowed.png');

    // The same token reads what it may: the runs list shows its pipeline, not the other.
    await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link', { name: 'Runs' })
      .click();
    const pipelines = page.getByRole('table', { name: 'Pipelines' });
    await pipelines.getByRole('link', { name: PIPELINE, exact: true }).waitFor();
    expect(await pipelines.getByRole('link', { name: SECRET_PIPELINE, exact: true }).count()).toBe(
      0,
    );
  });

  it('when the token expires mid-stream, asks again over the run view and resumes the log without duplicates or gaps', async () => {
    await setStatus(PIPELINE, 'r2', 'running');
    await appendLog(PIPELINE, 'r2', lines(1, 10));
    const { page } = await freshPage();
    const streams: (string | undefined)[] = [];
    page.on('request', (request) => {
      if (!request.url().includes(`${runPath(PIPELINE, 'r2')}/stream`)) return;
      void request.allHeaders().then((headers) => streams.push(headers['last-event-id']));
    });
    await page.goto(`${server!.url}/ui/pipelines/${PIPELINE}/runs/r2`);
    await page.getByRole('heading', { level: 1, name: 'Sign in' }).waitFor();

    // A token of seconds: its stream ends with `tokenExpired` at exp. Long enough for what comes
    // before it on a busy machine (the checks before the dialog must see it still valid).
    const shortLived = await mint({ read: ['pipeline:dash.*'] }, 15, 'viewer');
    await signIn(page, shortLived, page);
    await page.getByTestId('connection-state').getByText('Live', { exact: true }).waitFor();
    await expect.poll(() => logLines(page)).toEqual(lineList(1, 10));
    await appendLog(PIPELINE, 'r2', lines(11, 15));
    await expect.poll(() => logLines(page)).toEqual(lineList(1, 15));
    // Some state of the view that must outlive the sign-in.
    const search = page.getByRole('searchbox', { name: 'Search the log' });
    await search.fill('line 12');
    await page.getByTestId('search-count').getByText('1 of 1', { exact: true }).waitFor();

    const dialog = page.getByRole('dialog', { name: 'Sign in again' });
    await dialog.waitFor({ timeout: 30_000 });
    expect(await dialog.textContent()).toContain('Your token expired.');
    expect(await page.getByTestId('connection-state').textContent()).toBe(
      'Paused: the token expired; sign in again to resume',
    );
    const dialogField = dialog.getByLabel('Token');
    expect(
      await dialogField.evaluate((element) => element === element.ownerDocument.activeElement),
    ).toBe(true);
    // The view stayed: the same log and search behind the dialog.
    expect(await logLines(page)).toEqual(lineList(1, 15));
    expect(await search.inputValue()).toBe('line 12');
    expect(await seriousAxeViolations(page)).toEqual([]);
    await screenshot(page, 'dashboard-sign-in-again.png');

    // Written while the viewer was signed out: shown after the sign-in, once.
    await appendLog(PIPELINE, 'r2', lines(16, 20));
    const fresh = await mint({ read: ['pipeline:dash.*'] }, 3600, 'viewer');
    await signIn(page, fresh, dialog);
    await dialog.waitFor({ state: 'detached' });
    await page.getByTestId('connection-state').getByText('Live', { exact: true }).waitFor();
    await expect.poll(() => logLines(page)).toEqual(lineList(1, 20));
    // Resumed from its cursor (Last-Event-ID), not reloaded from the start.
    await expect.poll(() => streams.length).toBe(2);
    expect(streams[0]).toBeUndefined();
    expect(streams[1]).toMatch(/\S/);
    expect(await search.inputValue()).toBe('line 12');

    // And live from there.
    await appendLog(PIPELINE, 'r2', lines(21, 22));
    await expect.poll(() => logLines(page)).toEqual(lineList(1, 22));
    expect(streams).toHaveLength(2);
  });
});
