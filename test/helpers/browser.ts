import { copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Browser, BrowserContext, Locator, Page } from 'playwright-core';
import { launchChromium } from '#fixtures/chromium';
import { expect } from 'vitest';
import { uniqueId } from './settings.js';
import { freePort } from './ports.js';

export { freePort };

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
/** Where failed browser tests leave a screenshot (git-ignored). */
export const TEST_RESULTS = join(ROOT, 'test-results');
/** The README's screenshots, refreshed when UPDATE_SCREENSHOTS=1 (`npm run screenshots`). */
export const DOC_SCREENSHOTS = join(ROOT, 'docs/screenshots');

export interface RunningBrowser {
  browser: Browser;
  context: BrowserContext;
  page: Page;
  /** The uncaught errors of every page opened here: a browser test ends by expecting none. */
  pageErrors: string[];
  /** The URL of every document loaded in a page opened here: a check for script errors that loaded none checked nothing. */
  pagesLoaded: string[];
  /** A page in a context of its own (its own cookies: another person on another computer), watched like the first. */
  newPerson(): Promise<{ context: BrowserContext; page: Page }>;
  /** Closes every context opened here, then the browser. */
  close(): Promise<void>;
}

/**
 * How long a browser test waits for an element or a navigation before failing. The page may wait on
 * the edge's first discovery, which loads the directory index and the model: on a slower two-core
 * host with the suite beside it that took more than 15 s (2026-11-29).
 */
const ACTION_TIMEOUT_MS = 30_000;

/** A browser test's own time limit (the suite's default is 30 s): a test walks through several pages. */
export const BROWSER_TEST_TIMEOUT_MS = 120_000;

/** Chromium as packages/fixtures/chromium.ts launches it, with a context per person, watched for script errors. */
export async function launchBrowser(options: { viewport?: { width: number; height: number } } = {}): Promise<RunningBrowser> {
  const browser = await launchChromium();
  const pageErrors: string[] = [];
  const pagesLoaded: string[] = [];
  const contexts: BrowserContext[] = [];
  async function newPerson() {
    const context = await browser.newContext({ viewport: options.viewport ?? { width: 1280, height: 860 }, locale: 'en-US', timezoneId: 'UTC' });
    contexts.push(context);
    const page = await context.newPage();
    page.on('pageerror', (error) => pageErrors.push(error.message));
    page.on('load', () => pagesLoaded.push(page.url()));
    page.setDefaultTimeout(ACTION_TIMEOUT_MS);
    return { context, page };
  }
  const { context, page } = await newPerson();
  return {
    browser,
    context,
    page,
    pageErrors,
    pagesLoaded,
    newPerson,
    async close() {
      for (const each of contexts) await each.close().catch(() => undefined);
      await browser.close().catch(() => undefined);
    },
  };
}

const safeName = (name: string) =>
  name
    .replace(/[^a-z0-9]+/gi, '-')
    .replace(/^-|-$/g, '')
    .toLowerCase()
    .slice(0, 100);

/** Keeps a full-page screenshot of a failed test in test-results/. */
export async function screenshotOnFailure(page: Page | undefined, testName: string): Promise<void> {
  if (!page || page.isClosed()) return;
  mkdirSync(TEST_RESULTS, { recursive: true });
  const path = join(TEST_RESULTS, `${safeName(testName)}.png`);
  await page.screenshot({ path, fullPage: true }).catch(() => undefined);
  console.error(`screenshot of the failed test: ${path}`);
}

/**
 * Takes a README screenshot: always into test-results/screenshots/, and into docs/screenshots/
 * when UPDATE_SCREENSHOTS=1, so an ordinary test run leaves the working tree clean.
 */
export async function docScreenshot(page: Page, name: string, options: { fullPage?: boolean } = {}): Promise<string> {
  const dir = join(TEST_RESULTS, 'screenshots');
  mkdirSync(dir, { recursive: true });
  const path = join(dir, `${name}.png`);
  await page.screenshot({ path, fullPage: options.fullPage ?? true });
  if (process.env.UPDATE_SCREENSHOTS === '1') {
    mkdirSync(DOC_SCREENSHOTS, { recursive: true });
    copyFileSync(path, join(DOC_SCREENSHOTS, `${name}.png`));
  }
  return path;
}

/**
 * Signs up through the dashboard's sign-up page, acknowledges the one-time key and waits for the
 * overview; answers the full key the page showed once.
 */
export async function signUpInBrowser(page: Page, base: string, email: string, password: string): Promise<string> {
  await page.goto(`${base}/signup`);
  await page.getByLabel('Email', { exact: true }).fill(email);
  await page.getByLabel('Password', { exact: true }).fill(password);
  await page.getByRole('button', { name: 'Create account' }).click();
  const key = (await page.getByTestId('full-key').textContent())?.trim() ?? '';
  await page.getByRole('button', { name: /I have stored it/ }).click();
  await page.getByRole('heading', { name: 'Overview' }).waitFor();
  return key;
}

/** Clicks `refresh` until `locator` shows (for state that changes in a worker, off the page). */
export async function refreshUntil(refresh: () => Locator, locator: Locator, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    await refresh().click();
    try {
      await locator.waitFor({ timeout: 700 });
      return;
    } catch (error) {
      if (Date.now() > until) throw error;
    }
  }
}

/**
 * The closing test of a browser test file, which must mean something when run alone (`vitest -t`):
 * `visit` drives a page of its own, in a context of its own. Then at least one document must have
 * loaded in this test, and no page opened in this browser may have thrown: this one's and, in a full
 * run, those of every earlier test of the file.
 */
export async function expectNoScriptErrors(browser: RunningBrowser, visit: (page: Page) => Promise<void>): Promise<void> {
  const loadedBefore = browser.pagesLoaded.length;
  const { context, page } = await browser.newPerson();
  try {
    await visit(page);
  } finally {
    await context.close();
  }
  expect(browser.pagesLoaded.length, 'documents loaded by this check').toBeGreaterThan(loadedBefore);
  expect(browser.pageErrors).toEqual([]);
}

/**
 * A visit for expectNoScriptErrors: a new owner signs up and opens each of `pages` (main navigation
 * labels, which are also the pages' headings) until its data has loaded.
 */
export const asNewOwner =
  (base: string, pages: string[]) =>
  async (page: Page): Promise<void> => {
    await signUpInBrowser(page, base, `${uniqueId('script-errors')}@example.test`, 'correct horse battery staple');
    for (const title of pages) {
      await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: title, exact: true }).click();
      await page.getByRole('heading', { level: 1, name: title, exact: true }).waitFor();
      await expect.poll(() => page.locator('.loading').count(), { message: `the ${title} page is still loading` }).toBe(0);
    }
  };

/** A visit for expectNoScriptErrors that needs no sign-in: the sign-in and sign-up pages. */
export const signedOutPages =
  (base: string) =>
  async (page: Page): Promise<void> => {
    for (const [path, heading] of [
      ['/signin', 'Sign in'],
      ['/signup', 'Create an account'],
    ] as const) {
      await page.goto(`${base}${path}`);
      await page.getByRole('heading', { level: 1, name: heading, exact: true }).waitFor();
    }
  };
