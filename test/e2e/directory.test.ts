import type { FastifyInstance } from 'fastify';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import {
  type RunningBrowser,
  asNewOwner,
  expectNoScriptErrors,
  freePort,
  launchBrowser,
  screenshotOnFailure,
  signUpInBrowser,
  BROWSER_TEST_TIMEOUT_MS,
} from '../helpers/browser.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';

/**
 * Browsing the directory in a real browser (Debian's Chromium via playwright-core) against a
 * listening edge and the imported catalog: "Show more" pages past the first 50 APIs, the sort
 * select orders them by name as the API does, a phone-width page shows a result before any
 * category, and discovery shows what matched, never a similarity score.
 */
describe('directory browsing in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  let app: FastifyInstance;
  let base: string;
  let browser: RunningBrowser;
  let page: Page;

  const names = () => page.getByTestId('api-item').locator('.api-name').allTextContents();
  const ids = () =>
    page
      .getByTestId('api-item')
      .locator('.api-name')
      .evaluateAll((links) =>
        links.map((a) => decodeURIComponent(new URL(a.getAttribute('href') ?? '', 'http://x').pathname.replace('/directory/', ''))),
      );

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = await buildApp(testEdgeSettings({ PORT: String(port), PUBLIC_URL: base, REDIS_PREFIX: uniqueId('dire2e') }));
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
    await signUpInBrowser(page, base, `${uniqueId('browse')}@example.test`, 'correct horse battery staple');
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
  });
  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `directory-${task.name}`));
  });

  it('loads past the first 50 APIs with "Show more", without repeats', async () => {
    await page.goto(`${base}/directory`);
    const items = page.getByTestId('api-item');
    await items.nth(49).waitFor();
    await expect(items.count()).resolves.toBe(50);
    await page.getByTestId('show-more').click();
    await items.nth(99).waitFor();
    await page.getByTestId('show-more').click();
    await items.nth(149).waitFor();
    const shown = await ids();
    expect(shown).toHaveLength(150);
    expect(new Set(shown).size).toBe(150);
    await expect(page.getByTestId('shown-count').textContent()).resolves.toContain('Showing 150 APIs');
  });

  it('sorts by name, in the order the API pages in, across "Show more"', async () => {
    await page.goto(`${base}/directory`);
    await page.getByTestId('api-item').first().waitFor();
    await page.getByTestId('sort-select').selectOption('name');
    await page.waitForURL(/sort=name/);
    await expect.poll(async () => (await names())[0]).toBe(await firstNameByApi());
    await page.getByTestId('show-more').click();
    await page.getByTestId('api-item').nth(99).waitFor();
    const first = (await fetchJson('/api/v1/apis?sort=name&limit=50')) as { apis: { id: string }[]; nextCursor: string };
    const second = (await fetchJson(`/api/v1/apis?sort=name&limit=50&cursor=${first.nextCursor}`)) as { apis: { id: string }[] };
    expect(await ids()).toEqual([...first.apis, ...second.apis].map((a) => a.id));
    // And by name as a person reads it: case aside, every name sorts after the one before it.
    const shownNames = (await names()).map((n) => n.toLowerCase());
    const outOfOrder = shownNames.filter((name, n) => n > 0 && name.localeCompare(shownNames[n - 1]!, 'en', { sensitivity: 'base' }) < 0);
    expect(outOfOrder.length, `out of order: ${outOfOrder.join(', ')}`).toBeLessThanOrEqual(shownNames.length / 20);
  });

  it('on a phone, shows a result before any category chip, and picks a category from a select', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(`${base}/directory`);
      const firstItem = page.getByTestId('api-item').first();
      await firstItem.waitFor();
      const itemTop = (await firstItem.boundingBox())!.y;
      const chipsAbove = await page
        .locator('.chip')
        .evaluateAll(
          (chips, top) => chips.filter((c) => c.getBoundingClientRect().height > 0 && c.getBoundingClientRect().top < top).length,
          itemTop,
        );
      expect(chipsAbove).toBe(0);
      const select = page.getByTestId('category-select');
      await expect(select.isVisible()).resolves.toBe(true);
      const option = await select.locator('option').nth(1).getAttribute('value');
      await select.selectOption(option!);
      await page.waitForURL(new RegExp(`category=${option}`));
      await page.getByRole('heading', { name: `Category: ${option}` }).waitFor();
      await page.getByTestId('api-item').first().waitFor();
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
    }
  });

  it('shows what matched a described task, and no similarity score', async () => {
    await page.goto(`${base}/directory`);
    await page.getByLabel('Natural language').check();
    await page.getByLabel('Describe what you need').fill('send a text message to a phone');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByRole('heading', { name: 'APIs for “send a text message to a phone”' }).waitFor();
    await page.getByTestId('discovery-match').first().waitFor();
    const matches = await page.getByTestId('discovery-match').allTextContents();
    expect(matches.length).toBe(await page.getByTestId('api-item').count());
    expect(matches.every((m) => m.trim().length > 0)).toBe(true);
    const text = (await page.locator('main').textContent()) ?? '';
    expect(text).not.toMatch(/similarity|score/i);
    expect(matches.join(' ')).toMatch(/sms|text|message/i);
    // The operations that do it, each with what a call on it costs.
    const operations = await page.getByTestId('discovery-operation').allTextContents();
    expect(operations.length).toBeGreaterThan(0);
    expect(
      operations.every((o) => /(GET|POST|PUT|PATCH|DELETE) \/.* · \$[\d.,]+ per call/.test(o)),
      operations.join('\n'),
    ).toBe(true);
  });

  it('ran without script errors', async () => {
    await expectNoScriptErrors(browser, asNewOwner(base, ['Directory']));
  });

  async function fetchJson(path: string): Promise<unknown> {
    const response = await fetch(new URL(path, base));
    expect(response.status, path).toBe(200);
    return response.json();
  }
  async function firstNameByApi(): Promise<string> {
    const body = (await fetchJson('/api/v1/apis?sort=name&limit=1')) as { apis: { name: string }[] };
    return body.apis[0]!.name;
  }
});
