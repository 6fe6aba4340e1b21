import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import type { Browser, Page } from 'playwright-core';

// The dashboard's browser tests drive Debian's Chromium (installed by `bash scripts/services.sh`)
// with playwright-core against a real server serving dist/web (built by `npm run build`).
// Never `npx playwright install`.

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Where the browser tests save their screenshots. */
export const OUTPUT = join(ROOT, 'test-output');
export const CHROMIUM = '/usr/bin/chromium';

/** Headless, no sandbox, and nothing that reaches out to the network on its own. */
export const CHROMIUM_ARGS: readonly string[] = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/** Fails with what to run when /usr/bin/chromium or the built dashboard is missing. */
export function checkBrowserPrerequisites(): void {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`${CHROMIUM} is missing: run \`bash scripts/services.sh\` first`);
  }
  if (!existsSync(join(ROOT, 'dist/web/index.html'))) {
    throw new Error('dist/web is missing: run `npm run build` first');
  }
  mkdirSync(OUTPUT, { recursive: true });
}

/**
 * Checks the prerequisites and launches Chromium. launch() gives the browser a fresh, temporary
 * profile of its own (a user-data-dir).
 */
export async function launchChromium(): Promise<Browser> {
  checkBrowserPrerequisites();
  return chromium.launch({ executablePath: CHROMIUM, timeout: 60_000, args: [...CHROMIUM_ARGS] });
}

/** A page in a new 1280×800 context whose waits default to `timeoutMs`. */
export async function newPage(browser: Browser, timeoutMs: number): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  context.setDefaultTimeout(timeoutMs);
  return context.newPage();
}

/**
 * Every Content-Security-Policy violation the page reports from now on (Chromium logs each as
 * a console error), so a test can check that the dashboard needs nothing its policy forbids.
 */
export function watchCspViolations(page: Page): string[] {
  const violations: string[] = [];
  page.on('console', (message) => {
    if (message.type() === 'error' && /Content Security Policy/i.test(message.text())) {
      violations.push(message.text());
    }
  });
  return violations;
}

/** Saves a full-page screenshot as test-output/`name` and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  const path = join(OUTPUT, name);
  await page.screenshot({ path, fullPage: true });
  console.log(`dashboard screenshot: ${path}`);
  return path;
}

const AXE = createRequire(import.meta.url).resolve('axe-core/axe.min.js');

export interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  targets: string[];
}

/**
 * Runs axe-core (the accessibility engine browsers' dev tools use) on the page as it is, and
 * returns what it finds at `serious` or `critical` impact.
 */
export async function seriousAxeViolations(page: Page): Promise<AxeViolation[]> {
  // Evaluated through the DevTools protocol, which the page's Content-Security-Policy does not
  // govern (a <script> tag would be refused, as it should be), so the page keeps its policy.
  await page.evaluate(readFileSync(AXE, 'utf8'));
  const violations = await page.evaluate(async () => {
    type Result = {
      violations: {
        id: string;
        impact: string | null;
        help: string;
        nodes: { target: string[] }[];
      }[];
    };
    const axe = (globalThis as unknown as { axe: { run(): Promise<Result> } }).axe;
    return (await axe.run()).violations.map((v) => ({
      id: v.id,
      impact: v.impact,
      help: v.help,
      targets: v.nodes.map((node) => node.target.join(' ')),
    }));
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}
