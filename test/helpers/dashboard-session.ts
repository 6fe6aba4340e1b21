import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import {
  checkBrowserPrerequisites,
  launchChromium,
  newPage,
  watchCspViolations,
} from './browser.js';
import { startServerProcess } from './server-process.js';
import type { ServerProcess } from './server-process.js';

/** What a dashboard browser test works with: a real server, Chromium, and a page on it. */
export interface DashboardSession {
  server: ServerProcess;
  browser: Browser;
  page: Page;
  /** Content-Security-Policy violations the page reported (watchCspViolations). */
  cspViolations: string[];
  /** Closes the browser, stops the server and deletes its data. */
  close(): Promise<void>;
}

/**
 * A `tailwater serve` of its own on loopback (its data in a new temporary directory, `env` its
 * settings), Chromium, and a 1280×800 page whose waits default to `timeoutMs`: what every
 * dashboard browser test starts from. Needs `npm run build` and Chromium (scripts/services.sh).
 */
export async function openDashboard(
  name: string,
  env: Record<string, string>,
  timeoutMs: number,
): Promise<DashboardSession> {
  checkBrowserPrerequisites();
  const dataDir = mkdtempSync(join(tmpdir(), `tailwater-${name}-`));
  let server: ServerProcess | undefined;
  let browser: Browser | undefined;
  const close = async () => {
    await browser?.close();
    await server?.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    server = await startServerProcess(['--data', dataDir, '--host', '127.0.0.1'], env);
    browser = await launchChromium();
    const page = await newPage(browser, timeoutMs);
    return { server, browser, page, cspViolations: watchCspViolations(page), close };
  } catch (error) {
    await close();
    throw error;
  }
}
