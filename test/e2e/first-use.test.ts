import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { loadCookbooks } from '#db/cookbooks';
import { createRedis } from '#core/platform';
import { usageProcessor } from '#workers/queues/usage';
import {
  expectNoScriptErrors,
  freePort,
  launchBrowser,
  screenshotOnFailure,
  signUpInBrowser,
  asNewOwner,
  docScreenshot,
  type RunningBrowser,
  BROWSER_TEST_TIMEOUT_MS,
} from '../helpers/browser.js';
import { edgeClient, expectStatus, weatherSessionAtApproval } from '../helpers/edge-client.js';
import { createTestApi, startWorker, type RunningWorker } from '../helpers/cookbooks.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

/**
 * First use and daily use (issue 33) in Chromium against a real edge, Postgres, Redis and a Temporal
 * worker of this file's own: a new person goes from sign-up to a first paid call with the overview's
 * checklist alone; the Inbox badge counts waiting steps; the Cookbooks page says what each cookbook
 * needs and starts one; a step sent back with "request changes" returns with its note; and the
 * dashboard's dead ends (Top APIs' platform rows, the Connections example, the webhook form) lead
 * somewhere. Steps share one signed-in page and run in order.
 */
describe('first use and daily use in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const taskQueue = uniqueId('first-use-e2e-');
  const redisPrefix = uniqueId('firstuse');
  const email = `${uniqueId('newcomer')}@example.test`;
  const password = 'correct horse battery staple';
  let app: FastifyInstance;
  let base: string;
  let workerRedis: Redis;
  let worker: RunningWorker;
  let usageWorker: Worker;
  let upstream: TestUpstream;
  let meteredApi: string;
  let keyApi: string;
  let browser: RunningBrowser;
  let page: Page;
  let key = '';

  const call = edgeClient(() => base);
  const nav = (label: string) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: label, exact: true });
  const checklist = () => page.locator('section.card').filter({ has: page.getByRole('heading', { name: 'Get started' }) });
  const item = (id: string) => page.locator(`[data-testid="checklist-item"][data-item="${id}"]`);

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    upstream = await startUpstream((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ forecast: 'storm', path: req.url }));
    });
    // Added with the operator's CLI, as an operator adds an API: one to call, one that needs a key of one's own.
    meteredApi = await registerApi({ baseUrl: upstream.url, price: '0.002' });
    keyApi = await registerApi({ baseUrl: 'http://127.0.0.1:9', price: '0.001', auth: 'header:X-Upstream-Key' });
    app = await buildApp(
      testEdgeSettings({
        PORT: String(port),
        PUBLIC_URL: base,
        REDIS_PREFIX: redisPrefix,
        TEMPORAL_TASK_QUEUE: taskQueue,
        SSE_HEARTBEAT_MS: '1000',
        ALLOW_PRIVATE_UPSTREAMS: 'true',
        USAGE_FLUSH_MS: '20',
      }),
    );
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
    const usage = usageProcessor({ sql: app.deps.sql });
    usageWorker = new Worker(usage.job.queue, usage.process, { connection: workerRedis, prefix: redisPrefix, concurrency: 2 });
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
    // "Copy" writes to the clipboard, as it does for a person.
    await browser.context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base });
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await worker?.stop();
    await usageWorker?.close();
    await workerRedis?.quit();
    await upstream?.close();
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `first-use-${task.name}`));
  });

  it('walks from sign-up to a first paid call with the checklist alone, and the checklist goes once done', async () => {
    key = await signUpInBrowser(page, base, email, password);
    await checklist().waitFor();
    await expect(page.getByTestId('checklist-remaining').textContent()).resolves.toContain('4 of 4 steps left');
    // 1. The key the sign-up page showed, with a button to copy it.
    await expect(page.getByTestId('checklist-key').textContent()).resolves.toBe(key);
    await item('copy_key').getByRole('button', { name: 'Copy key' }).click();
    await expect(page.evaluate<string>('navigator.clipboard.readText()')).resolves.toBe(key);
    await page.locator('[data-item="copy_key"][data-done="true"]').waitFor();
    // Each item from the account's own state: copying ticked one, nothing else.
    for (const id of ['discover', 'first_call', 'add_funds']) await expect(item(id).getAttribute('data-done')).resolves.toBe('false');
    // The commands carry the person's own key, and the MCP configuration points at this deployment.
    const mcp = JSON.parse((await page.getByTestId('mcp-config').textContent()) ?? '{}') as {
      mcpServers: Record<string, { url: string; headers: Record<string, string> }>;
    };
    expect(Object.values(mcp.mcpServers)[0]).toMatchObject({ url: `${base}/mcp`, headers: { Authorization: `Bearer ${key}` } });
    await docScreenshot(page, 'first-run-checklist');

    // 2. Find an API: the checklist's link to the directory, a search, the API's page.
    await item('discover').getByRole('link', { name: 'directory' }).click();
    await page.getByRole('heading', { level: 1, name: 'Directory' }).waitFor();
    await page.getByLabel('Search APIs').fill(meteredApi);
    await page.getByRole('button', { name: 'Search' }).click();
    await page
      .getByRole('link', { name: `Test ${meteredApi}` })
      .first()
      .click();
    await page.getByRole('heading', { level: 1, name: `Test ${meteredApi}` }).waitFor();
    await nav('Overview').click();
    await page.locator('[data-item="discover"][data-done="true"]').waitFor();

    // 3. The call command names the API just opened; with the path filled in, it is the first paid call.
    await item('first_call').getByLabel('Path').fill('/forecast');
    const command = (await page.getByTestId('call-command').textContent()) ?? '';
    const header = /-H '([^']+)'/.exec(command)?.[1] ?? '';
    const url = / '(https?:\/\/[^']+)'$/.exec(command)?.[1] ?? '';
    expect(header).toBe(`Authorization: Bearer ${key}`);
    expect(url).toBe(`${base}/api/v1/proxy/${meteredApi}/forecast`);
    const [name, value] = [header.slice(0, header.indexOf(':')), header.slice(header.indexOf(':') + 1).trim()];
    const answer = await fetch(url, { headers: { [name]: value } });
    expect(answer.status).toBe(200);
    await expect(answer.json()).resolves.toMatchObject({ forecast: 'storm', path: '/forecast' });
    // The checklist re-reads the account: the call ticks it without a reload.
    await page.locator('[data-item="first_call"][data-done="true"]').waitFor();
    await expect(page.getByTestId('checklist-remaining').textContent()).resolves.toContain('1 of 4 steps left');

    // 4. Add funds with the Balance card's form; then every step is done and the checklist is gone.
    await page.getByLabel('Amount in dollars').fill('5');
    await page.getByRole('button', { name: 'Add funds' }).click();
    await page.getByText('$5.00 added to your balance.').waitFor();
    await expect.poll(() => checklist().count(), { timeout: 10_000 }).toBe(0);
    const state = await call('/api/v1/me/checklist', { key });
    expectStatus(state, 200);
    expect(state.body).toMatchObject({ done: true, dismissed: false });
    await page.reload();
    await page.getByTestId('balance').filter({ hasText: '$5.99' }).waitFor();
    await expect(checklist().count()).resolves.toBe(0);
  });

  it('can be hidden before it is done, for good', async () => {
    const { context, page: other } = await browser.newPerson();
    try {
      const otherKey = await signUpInBrowser(other, base, `${uniqueId('hider')}@example.test`, password);
      const card = other.locator('section.card').filter({ has: other.getByRole('heading', { name: 'Get started' }) });
      await card.waitFor();
      await card.getByRole('button', { name: 'Hide this checklist' }).click();
      await expect.poll(() => card.count()).toBe(0);
      await other.reload();
      await other.getByTestId('balance').waitFor();
      await expect(card.count()).resolves.toBe(0);
      const state = await call('/api/v1/me/checklist', { key: otherKey });
      expect(state.body).toMatchObject({ done: false, dismissed: true });
      expectStatus(await call('/api/v1/me/checklist', { key: otherKey, method: 'POST', body: { mark: 'finished' } }), 400);
    } finally {
      await context.close();
    }
  });

  it('names what Top APIs bought outside the directory, and leads to where it can be seen', async () => {
    const { docs } = (await call('/api/v1/docs', { key })).body as { docs: { slug: string; price: number }[] };
    const priced = docs.find((doc) => doc.price > 0);
    expect(priced, 'a priced doc section').toBeDefined();
    expectStatus(await call(`/api/v1/docs/${priced!.slug}`, { key }), 200);
    await expect
      .poll(async () => ((await call('/api/v1/usage/stats', { key })).body.stats as { topApis: { apiId: string }[] }).topApis.map((t) => t.apiId), {
        timeout: 15_000,
      })
      .toContain('platform.docs');
    await page.reload();
    const top = page.locator('section.card').filter({ has: page.getByRole('heading', { name: 'Top APIs' }) });
    await top.getByRole('link', { name: 'Documentation sections' }).click();
    await page.getByRole('heading', { level: 1, name: 'Activity' }).waitFor();
    // Filtered to what was bought, named in words (the filter keeps the id).
    await expect.poll(() => page.getByLabel('API id', { exact: true }).inputValue()).toBe('platform.docs');
    await page.getByTestId('activity-row').filter({ hasText: 'Documentation sections' }).first().waitFor();
    await expect(page.getByText('API not found').count()).resolves.toBe(0);
  });

  it('counts waiting steps on the Inbox badge, and the note of "request changes" comes back with the step', async () => {
    await nav('Overview').click();
    await expect(page.getByTestId('inbox-count').count()).resolves.toBe(0);
    const first = await weatherSessionAtApproval(call, app.deps.sql, key);
    const second = await weatherSessionAtApproval(call, app.deps.sql, key);
    // Polled while the page is open: no navigation needed.
    await page.getByTestId('inbox-count').filter({ hasText: '2' }).waitFor({ timeout: 20_000 });
    await expect(nav('Inbox').getAttribute('title')).resolves.toBe('2 steps waiting for a person');

    await nav('Inbox').click();
    const card = page.getByTestId('human-step').filter({ hasText: first });
    await card.getByLabel(/Your note to the agent/).fill('Name the coast: Bergen is not enough.');
    await card.getByRole('button', { name: 'Request changes' }).click();
    await page.getByText('Changes requested: the session goes back to').waitFor();
    await page.getByTestId('inbox-count').filter({ hasText: '1' }).waitFor();

    // The agent drafts again; the approval comes back with the person's note on it.
    const redraft = await call(`/api/v1/cookbooks/sessions/${first}/complete-step`, {
      method: 'POST',
      key,
      body: { stepId: 'draft-message', resultData: { message: `Gale warning for the Bergen coast ${first}.`, recipients: ['+4712345678'] } },
    });
    expectStatus(redraft, 200);
    const back = page.getByTestId('human-step').filter({ hasText: first });
    const note = back.getByTestId('changes-requested');
    await note.waitFor({ timeout: 20_000 });
    await expect(note.textContent()).resolves.toContain('Name the coast: Bergen is not enough.');
    await expect(note.textContent()).resolves.toContain('Draft the SMS wording');
    await page.getByTestId('inbox-count').filter({ hasText: '2' }).waitFor();
    // The other session's step was never sent back: no note on it.
    await expect(page.getByTestId('human-step').filter({ hasText: second }).getByTestId('changes-requested').count()).resolves.toBe(0);
    const listed = await call('/api/v1/me/human-steps', { key });
    const steps = listed.body.humanSteps as { sessionId: string; changesRequested: unknown }[];
    expect(steps.find((s) => s.sessionId === first)?.changesRequested).toMatchObject({
      note: 'Name the coast: Bergen is not enough.',
      stepId: 'draft-message',
    });
    expect(steps.find((s) => s.sessionId === second)?.changesRequested).toBeNull();
  });

  it('lists cookbooks with the APIs and people each needs, and starts one from the page', async () => {
    await nav('Sessions').click();
    await page.getByRole('link', { name: 'See the cookbooks and start one' }).click();
    await page.getByRole('heading', { level: 1, name: 'Cookbooks' }).waitFor();
    const cookbook = page.getByTestId('cookbook').filter({ has: page.locator('#cookbook-weather-alert-sms') });
    await expect(cookbook.getByTestId('cookbook-apis').textContent()).resolves.toBe(
      'weather: an API for “location”sms: an API for “messaging”geocoder: an API for “location” (optional)',
    );
    await expect(cookbook.getByTestId('cookbook-steps').textContent()).resolves.toContain('3 for an agent, 1 for a person');
    await docScreenshot(page, 'cookbooks');
    await cookbook.getByRole('button', { name: 'Start…' }).click();
    await cookbook.getByLabel('API for “weather”').fill(await createTestApi(app.deps.sql, 'weather'));
    await cookbook.getByLabel('API for “sms”').fill(await createTestApi(app.deps.sql, 'sms'));
    await cookbook.getByRole('button', { name: 'Start session' }).click();
    await page.waitForURL(/\/sessions\/[^/]+$/);
    const sessionId = decodeURIComponent(new URL(page.url()).pathname.slice('/sessions/'.length));
    await page.getByTestId('session-status').getByText('Running').waitFor();
    const session = await call(`/api/v1/cookbooks/sessions/${sessionId}`, { key });
    expectStatus(session, 200);
    expect(session.body.session).toMatchObject({ cookbookId: 'weather-alert-sms', status: 'running' });
    // Not an operator (OPERATOR_EMAILS is unset here): no Temporal UI link, on a real session or a made-up one.
    await expect(page.getByRole('link', { name: 'Open workflow in Temporal UI' }).count()).resolves.toBe(0);
    expect((await call('/api/v1/me/operator-tools', { key })).body).toMatchObject({ operator: false, temporalUiUrl: null });
    await page.goto(`${base}/sessions/no-such-session`);
    await page.getByText('No such session').waitFor();
    await expect(page.getByRole('link', { name: 'Open workflow in Temporal UI' }).count()).resolves.toBe(0);
  });

  it('gives Connections an example id from the directory, and says when the webhook form takes local addresses', async () => {
    await nav('Connections').click();
    const field = page.getByLabel('API id', { exact: true });
    await expect.poll(() => field.getAttribute('placeholder')).toMatch(/^e\.g\. /);
    const example = ((await field.getAttribute('placeholder')) ?? '').slice('e.g. '.length);
    expect(example).not.toBe('openweathermap.org');
    const listed = await call(`/api/v1/apis/${example}`, { key });
    expectStatus(listed, 200);
    expect((listed.body.api as { callability: { state: string } }).callability.state).toBe('needs_key');
    expect(keyApi).toBeTruthy();

    await nav('Webhooks').click();
    const help = page.getByTestId('webhook-url-help');
    await help.getByText('also accepts http and local addresses such as http://localhost:8080/hooks').waitFor();
    await expect(help.textContent()).resolves.toContain('a production service refuses them');
  });

  it('ran without a script error in any page', async () => {
    await expectNoScriptErrors(browser, asNewOwner(base, ['Overview', 'Inbox', 'Sessions', 'Connections', 'Webhooks']));
  });
});
