import { readFile } from 'node:fs/promises';
import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { createRedis } from '#core/platform';
import { usageProcessor } from '#workers/queues/usage';
import {
  type RunningBrowser,
  asNewOwner,
  expectNoScriptErrors,
  freePort,
  launchBrowser,
  refreshUntil,
  screenshotOnFailure,
  signUpInBrowser,
  BROWSER_TEST_TIMEOUT_MS,
} from '../helpers/browser.js';
import { edgeClient, expectStatus } from '../helpers/edge-client.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * The Activity and Statement pages in a real browser (Debian's Chromium via playwright-core) against a
 * listening edge, the real usage worker and a local upstream: a person signs up, their key makes a
 * served call, a call the upstream answers 404 and one it answers 500 (refunded); the Activity page
 * shows each with its outcome, the failed ones with their code and hint; the Statement page's closing
 * balance is the balance, and its CSV download is the statement.
 */
describe('activity and statement in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const prefix = uniqueId('activitye2e');
  let app: FastifyInstance;
  let base: string;
  let upstream: TestUpstream;
  let workerRedis: Redis;
  let worker: Worker;
  let browser: RunningBrowser;
  let page: Page;
  let ownerKey = '';

  const call = edgeClient(
    () => base,
    () => ownerKey,
  );
  /** The Overview's way to the two pages (the top bar has no room for another link at 1280 px). */
  const fromOverview = async (target: Page, name: 'Activity' | 'Statement') => {
    await target.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Overview', exact: true }).click();
    await target.getByRole('link', { name, exact: true }).click();
    await target.getByRole('heading', { level: 1, name, exact: true }).waitFor();
  };

  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      const path = req.url ?? '/';
      const status = path.startsWith('/boom') ? 500 : path.startsWith('/missing') ? 404 : 200;
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(status === 200 ? 'ok' : 'no');
    });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = await buildApp(
      testEdgeSettings({ PORT: String(port), PUBLIC_URL: base, REDIS_PREFIX: prefix, ALLOW_PRIVATE_UPSTREAMS: 'true', USAGE_FLUSH_MS: '20' }),
    );
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    const processor = usageProcessor({ sql: app.deps.sql });
    worker = new Worker(processor.job.queue, processor.process, { connection: workerRedis, prefix });
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await worker?.close();
    await workerRedis?.quit();
    await upstream?.close();
  });
  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `activity-${task.name}`));
  });

  it('shows every call with its outcome, failed ones with their code and hint, and the statement adds up to the balance', async () => {
    ownerKey = await signUpInBrowser(page, base, `${uniqueId('activity')}@example.test`, 'correct horse battery staple');
    expectStatus(await call('/api/v1/balance', { method: 'POST', body: { amount: 1 } }), 200);
    const apiId = await registerApi({ baseUrl: upstream.url, price: '0.004' });
    const proxy = (path: string) =>
      rawRequest(base, { method: 'GET', path: `/api/v1/proxy/${apiId}${path}`, headers: { authorization: `Bearer ${ownerKey}` } });
    const served = await proxy('/ok');
    expect(served.status).toBe(200);
    expect((await proxy('/missing')).status).toBe(404);
    expect((await proxy('/boom')).status).toBe(502);

    await fromOverview(page, 'Activity');
    const rows = page.getByTestId('activity-row');
    await refreshUntil(() => page.getByRole('button', { name: 'Refresh' }), rows.nth(2));
    await expect(rows.count()).resolves.toBe(3);
    const refunded = page.locator('[data-testid="activity-row"][data-outcome="refunded"]');
    await expect(refunded.textContent()).resolves.toContain('upstream_error');
    await expect(refunded.textContent()).resolves.toContain('$0.004 refunded');
    const hints = page.getByTestId('activity-hint');
    await expect(hints.count()).resolves.toBe(2);
    await expect(hints.allTextContents()).resolves.toEqual(
      expect.arrayContaining([expect.stringContaining('The call was refunded'), expect.stringContaining('answered 404')]),
    );

    // Only the refunded call, by the filter.
    await page.getByLabel('Outcome').selectOption('refunded');
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => rows.count()).toBe(1);

    // The served call from the X-Request-Id its answer carried, which its details show.
    const requestId = String(served.headers['x-request-id']);
    await page.getByLabel('Outcome').selectOption('');
    await page.getByLabel('Request id').fill(requestId);
    await page.getByRole('button', { name: 'Apply' }).click();
    await expect.poll(() => page.locator('[data-testid="activity-row"][data-outcome="served"]').count()).toBe(1);
    await expect.poll(() => rows.count()).toBe(1);
    await rows.first().getByRole('button', { name: 'More' }).click();
    await expect.poll(() => page.getByText(requestId, { exact: true }).count()).toBe(1);
    await page.getByLabel('Request id').fill('');

    // The statement: the sign-up credit (if any), the top-up, three charges and a refund; its closing balance is the balance.
    await page.getByRole('navigation', { name: 'Activity and statement' }).getByRole('link', { name: 'Statement' }).click();
    await page.getByRole('heading', { level: 1, name: 'Statement', exact: true }).waitFor();
    const balance = (await call('/api/v1/balance')).body.balance as number;
    const dollars = new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 6 }).format(
      balance,
    );
    await expect.poll(() => page.getByTestId('statement-closing').textContent()).toBe(dollars);
    await expect(page.locator('[data-testid="statement-row"][data-kind="charge"]').count()).resolves.toBe(3);
    await expect(page.locator('[data-testid="statement-row"][data-kind="refund"]').count()).resolves.toBe(1);

    const [download] = await Promise.all([page.waitForEvent('download'), page.getByTestId('statement-csv').click()]);
    expect(download.suggestedFilename()).toBe('statement.csv');
    const csv = await readFile((await download.path())!, 'utf8');
    const lines = csv.trim().split('\r\n');
    const amount = lines[0]!.split(',').indexOf('amount_micros');
    const total = lines.slice(1).reduce((sum, line) => sum + BigInt(line.split(',')[amount]!), 0n);
    expect(Number(total) / 1_000_000).toBe(balance);
  });

  it('loads the Activity and Statement pages with no script error', async () => {
    await expectNoScriptErrors(browser, async (fresh) => {
      await asNewOwner(base, [])(fresh);
      for (const name of ['Activity', 'Statement'] as const) {
        await fromOverview(fresh, name);
        await expect.poll(() => fresh.locator('.loading').count(), { message: `the ${name} page is still loading` }).toBe(0);
      }
    });
  });
});
