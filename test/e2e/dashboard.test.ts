import { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { loadCookbooks } from '#db/cookbooks';
import { createRedis } from '#core/platform';
import {
  docScreenshot,
  freePort,
  launchBrowser,
  screenshotOnFailure,
  type RunningBrowser,
  expectNoScriptErrors,
  signedOutPages,
  BROWSER_TEST_TIMEOUT_MS,
} from '../helpers/browser.js';
import { edgeClient, expectStatus, weatherSessionAtApproval as weatherSessionAtApprovalOf } from '../helpers/edge-client.js';
import { createTestApi, startWorker, type RunningWorker } from '../helpers/cookbooks.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { usageProcessor } from '#workers/queues/usage';

/**
 * The dashboard in a real browser (Debian's Chromium via playwright-core) against a real listening
 * edge, Postgres, Redis and a Temporal worker of this file's own: a person signs up, manages keys,
 * tops up, completes a cookbook step an agent's session waits on (it arrives in the inbox live),
 * and signs out. Steps share one browser page and run in order.
 */
describe('dashboard in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const taskQueue = uniqueId('dashboard-e2e-');
  const redisPrefix = uniqueId('dash');
  const email = `${uniqueId('person')}@example.test`;
  const password = 'correct horse battery staple';
  let app: FastifyInstance;
  let base: string;
  let workerRedis: Redis;
  let worker: RunningWorker;
  let usageWorker: Worker;
  let upstream: TestUpstream;
  let meteredApi: string;
  let browser: RunningBrowser;
  let page: Page;
  let firstKey = '';
  let sessionId = '';

  const call = edgeClient(() => base);
  const dollars = (amount: number) =>
    new Intl.NumberFormat('en-US', { style: 'currency', currency: 'USD', minimumFractionDigits: 2, maximumFractionDigits: 6 }).format(amount);
  const nav = (label: string) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: label, exact: true });

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    // A real third-party stand-in behind the metered proxy: paths containing "fail" answer 500.
    upstream = await startUpstream((req, res) => {
      res.writeHead(req.url?.includes('fail') ? 500 : 200, { 'content-type': 'application/json' });
      res.end('{"forecast":"storm"}');
    });
    meteredApi = await registerApi({ baseUrl: upstream.url, price: '0.002' });
    app = await buildApp(
      testEdgeSettings({
        PORT: String(port),
        PUBLIC_URL: base,
        REDIS_PREFIX: redisPrefix,
        TEMPORAL_TASK_QUEUE: taskQueue,
        SSE_HEARTBEAT_MS: '1000',
        ALLOW_PRIVATE_UPSTREAMS: 'true',
        USAGE_FLUSH_MS: '20',
        // Low enough for the last test to reach it; this run's own REDIS_PREFIX starts the count at zero.
        RATE_LIMIT_LOGIN_MAX: '6',
        // The person of these tests runs the deployment too: their session pages link the Temporal UI.
        OPERATOR_EMAILS: email,
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
    onTestFailed(() => screenshotOnFailure(page, `dashboard-${task.name}`));
  });

  it('signs up, sees the first key once, and lands on the overview', async () => {
    await page.goto(`${base}/`);
    await expect(page.getByRole('heading', { name: 'Sign in' }).waitFor()).resolves.toBeUndefined();
    await page.getByRole('link', { name: 'Create an account' }).click();
    await page.getByLabel('Email', { exact: true }).fill(email);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Create account' }).click();
    await page.getByRole('heading', { name: 'Your account is ready' }).waitFor();
    firstKey = (await page.getByTestId('full-key').textContent())?.trim() ?? '';
    expect(firstKey).toMatch(/^service_sk_[0-9a-f]{48}$/);
    await expect(page.getByText('It is shown only once').isVisible()).resolves.toBe(true);
    await page.getByRole('button', { name: /I have stored it/ }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await expect(page.getByTestId('balance').textContent()).resolves.toBe('$1.00');
  });

  it('explains a wrong password and an existing email in sentences', async () => {
    const { context: other, page: anon } = await browser.newPerson();
    try {
      await anon.goto(`${base}/signin`);
      await anon.getByLabel('Email', { exact: true }).fill(email);
      await anon.getByLabel('Password', { exact: true }).fill('not the password at all');
      await anon.getByRole('button', { name: 'Sign in' }).click();
      await expect(anon.getByRole('alert').textContent()).resolves.toContain('The email or password is wrong');
      await anon.getByRole('link', { name: 'Create an account' }).click();
      await anon.getByLabel('Email', { exact: true }).fill(email);
      await anon.getByLabel('Password', { exact: true }).fill(password);
      await anon.getByRole('button', { name: 'Create account' }).click();
      await expect(anon.getByRole('alert').textContent()).resolves.toContain('An account with this email already exists');
    } finally {
      await other.close();
    }
  });

  it('tops up the balance in sandbox mode', async () => {
    await page.getByLabel('Amount in dollars').fill('5');
    await page.getByRole('button', { name: 'Add funds' }).click();
    await page.getByText('$5.00 added to your balance.').waitFor();
    await page.getByTestId('balance').filter({ hasText: '$6.00' }).waitFor();
    const balance = await call('/api/v1/balance', { key: firstKey });
    expectStatus(balance, 200);
    expect(balance.body.balance).toBe(6);

    // An agent calls an API through the proxy (two calls fail upstream and are refunded); the
    // overview then charts the day, lists the API and shows the error rate.
    for (const path of ['forecast', 'forecast', 'alerts', 'forecast', 'fail', 'alerts', 'forecast', 'fail', 'forecast', 'alerts']) {
      const res = await fetch(`${base}/api/v1/proxy/${meteredApi}/${path}`, { headers: { authorization: `Bearer ${firstKey}` } });
      expect([200, 502], `proxy answered ${res.status}`).toContain(res.status);
      await res.arrayBuffer();
    }
    await expect
      .poll(async () => ((await call('/api/v1/usage?days=30', { key: firstKey })).body.totals as { calls: number }).calls, { timeout: 15_000 })
      .toBe(10);
    await page.reload();
    await page.locator('figure.chart svg rect').last().waitFor();
    await page.getByRole('cell', { name: meteredApi }).waitFor();
    await page.getByText('20%', { exact: true }).waitFor();
    await docScreenshot(page, 'overview');
  });

  it('creates a key shown once, disables it, revokes another after confirmation', async () => {
    await nav('Keys').click();
    await page.getByRole('heading', { name: 'Keys', exact: true }).waitFor();
    await page.getByLabel('Key name').fill('e2e server');
    await page.getByRole('button', { name: 'Create key' }).click();
    const fullKey = (await page.getByTestId('full-key').textContent())?.trim() ?? '';
    expect(fullKey).toMatch(/^service_sk_[0-9a-f]{48}$/);
    expectStatus(await call('/api/v1/balance', { key: fullKey }), 200);
    await page.getByRole('button', { name: /hide the key/ }).click();
    await expect(page.getByTestId('full-key').count()).resolves.toBe(0);
    expect(await page.content()).not.toContain(fullKey);

    const row = page.getByTestId('key-row').filter({ hasText: 'e2e server' });
    await row.getByRole('button', { name: 'Disable e2e server' }).click();
    await row.getByText('Disabled', { exact: true }).waitFor();
    expectStatus(await call('/api/v1/balance', { key: fullKey }), 403);

    await page.getByLabel('Key name').fill('short-lived');
    await page.getByRole('button', { name: 'Create key' }).click();
    await page.getByRole('button', { name: /hide the key/ }).click();
    const doomed = page.getByTestId('key-row').filter({ hasText: 'short-lived' });
    await doomed.getByRole('button', { name: 'Revoke' }).click();
    await doomed.getByRole('button', { name: 'Revoke for good' }).click();
    await doomed.getByText('Revoked', { exact: true }).waitFor();
    await expect(page.getByTestId('key-row').count()).resolves.toBe(3);

    // An agent key with a spending limit and an allow-list; its limits are listed with it.
    await page.getByLabel('Name', { exact: true }).fill('research agent');
    await page.getByLabel('Spending limit in dollars (optional)').fill('2.50');
    await page.getByLabel('Allowed API ids (optional, comma separated)').fill(meteredApi);
    await page.getByRole('button', { name: 'Create agent key' }).click();
    const agentKey = (await page.getByTestId('full-key').textContent())?.trim() ?? '';
    expect(agentKey).toMatch(/^service_sk_[0-9a-f]{48}$/);
    expectStatus(await call('/api/v1/keys', { key: agentKey }), 403);
    await page.getByRole('button', { name: /hide the key/ }).click();
    const agentRow = page.getByTestId('agent-key-row').filter({ hasText: 'research agent' });
    await agentRow.getByText(`spent $0.00 of $2.50 · only ${meteredApi}`, { exact: false }).waitFor();
    await docScreenshot(page, 'keys');
  });

  it('connects a bring-your-own key showing only its hint, and disconnects it', async () => {
    const byoKey = 'sk-e2e-secret-0123456789wxyz';
    await nav('Connections').click();
    await page.getByText('No connections yet').waitFor();
    await page.getByLabel('API id', { exact: true }).fill(meteredApi);
    await page.getByLabel('Your key for that API', { exact: true }).fill(byoKey);
    await page.getByRole('button', { name: 'Connect', exact: true }).click();
    await page.getByText(`Connected ${meteredApi}.`).waitFor();
    const list = page.getByRole('list', { name: 'Connected APIs' });
    await list.getByText('…wxyz').waitFor();
    expect(await page.content()).not.toContain(byoKey);
    await expect(page.getByLabel('Your key for that API', { exact: true }).inputValue()).resolves.toBe('');

    await list.getByRole('button', { name: 'Disconnect' }).click();
    await list.getByRole('button', { name: 'Yes, disconnect' }).click();
    await page.getByText('No connections yet').waitFor();
    const connections = await call('/api/v1/me/apis', { key: firstKey });
    expectStatus(connections, 200);
    expect(connections.body.connections).toEqual([]);
  });

  it('fits a phone screen and works from the keyboard', async () => {
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      await page.goto(`${base}/keys`);
      await page.getByRole('heading', { name: 'Keys', exact: true }).waitFor();
      const overflow = await page.evaluate<number>('document.documentElement.scrollWidth - document.documentElement.clientWidth');
      expect(overflow, 'horizontal scrolling on a phone').toBeLessThanOrEqual(0);
      // The navigation folds behind a menu button on narrow screens.
      await expect(nav('Inbox').isVisible()).resolves.toBe(false);
      await page.getByRole('button', { name: 'Menu' }).click();
      await nav('Overview').waitFor();
      await docScreenshot(page, 'phone-menu', { fullPage: false });
      await nav('Overview').click();
      await page.getByRole('heading', { name: 'Overview' }).waitFor();
    } finally {
      await page.setViewportSize({ width: 1280, height: 860 });
    }
    // On a fresh load the first Tab reaches the skip link; Enter on a focused button acts (buttons, not divs).
    await page.reload();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.keyboard.press('Tab');
    await expect(page.evaluate<string | undefined>('document.activeElement?.textContent')).resolves.toBe('Skip to content');
    const before = (await call('/api/v1/balance', { key: firstKey })).body.balance as number;
    await page.getByLabel('Amount in dollars').fill('1');
    await page.getByRole('button', { name: 'Add funds' }).focus();
    await page.keyboard.press('Enter');
    await page
      .getByTestId('balance')
      .filter({ hasText: dollars(before + 1) })
      .waitFor();
  });

  it('searches the directory, shows the $0.01 charge before buying instructions, and votes', async () => {
    await nav('Directory').click();
    await page.getByRole('heading', { name: 'Directory', exact: true }).waitFor();
    await page.getByRole('navigation', { name: 'Categories' }).getByRole('link').nth(1).waitFor();
    await page.getByLabel('Search APIs').fill('weather');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByRole('heading', { name: 'Results for “weather”' }).waitFor();
    const first = page.getByTestId('api-item').first();
    await first.waitFor();
    await first.getByRole('link').first().click();

    // The price is on the page before anything is charged.
    const buy = page.getByRole('button', { name: 'Show instructions for $0.01' });
    await buy.waitFor();
    await expect(page.getByText('Reading them costs $0.01').isVisible()).resolves.toBe(true);
    const before = (await call('/api/v1/balance', { key: firstKey })).body.balance as number;
    await buy.click();
    await page.getByText('$0.01 was charged to your balance.').waitFor();
    await expect(page.locator('.markdown').first().textContent()).resolves.toMatch(/\S/);
    const after = (await call('/api/v1/balance', { key: firstKey })).body.balance as number;
    expect(Math.round((before - after) * 1e6)).toBe(10_000);

    // Other runs may have voted on the same API: count from the tally shown.
    const up = page.getByRole('button', { name: /^▲ Useful \(\d+\)$/ });
    await up.waitFor();
    const upBefore = Number(/\((\d+)\)/.exec((await up.textContent()) ?? '')?.[1]);
    await up.click();
    await page.getByRole('button', { name: `▲ Useful (${upBefore + 1})` }).waitFor();
    await expect(up.getAttribute('aria-pressed')).resolves.toBe('true');
    await docScreenshot(page, 'api-details', { fullPage: false });

    // Natural-language discovery answers with a reason per API.
    await page.goto(`${base}/directory`);
    await page.getByLabel('Natural language').check();
    await page.getByLabel('Describe what you need').fill('send a text message to a phone');
    await page.getByRole('button', { name: 'Search', exact: true }).click();
    await page.getByRole('heading', { name: 'APIs for “send a text message to a phone”' }).waitFor();
    await page.getByTestId('api-item').first().waitFor();

    // Each API says whether you can call it now; "Callable now" keeps only the ready ones.
    await page.goto(`${base}/directory`);
    await page.getByTestId('callability').first().waitFor();
    const listed = await page.getByTestId('callability').evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-state')));
    expect(listed.length).toBeGreaterThan(0);
    await page.getByLabel('Callable now').check();
    await page.waitForURL(/callable=true/);
    await expect
      .poll(async () => {
        const states = await page.getByTestId('callability').evaluateAll((nodes) => nodes.map((n) => n.getAttribute('data-state')));
        return states.length > 0 && states.every((state) => state === 'ready');
      })
      .toBe(true);
    await page.getByText('Ready').first().waitFor();
  });

  it("shows an agent's human step in the inbox live, and completing it advances the session", async () => {
    const weatherApi = await createTestApi(app.deps.sql, 'weather');
    const smsApi = await createTestApi(app.deps.sql, 'sms');
    await nav('Inbox').click();
    await page.getByText('Nothing needs you right now').waitFor();
    // A marker on the window: it survives only if the page is never reloaded.
    await page.evaluate(() => Object.assign(globalThis, { e2eMarker: 'not reloaded' }));

    // The agent starts a session with its key; the inbox notices it and follows its event stream.
    const started = await call('/api/v1/cookbooks/weather-alert-sms/start', {
      method: 'POST',
      key: firstKey,
      body: { selectedApis: { weather: weatherApi, sms: smsApi } },
    });
    expectStatus(started, 201);
    sessionId = (started.body.session as { sessionId: string }).sessionId;
    await page.getByText('Live: following 1 session').waitFor();

    // The agent works through its steps; the human step then arrives over SSE.
    const agent = (stepId: string, resultData: unknown) =>
      call(`/api/v1/cookbooks/sessions/${sessionId}/complete-step`, { method: 'POST', key: firstKey, body: { stepId, resultData } });
    expectStatus(
      await agent('fetch-forecast', { location: { name: 'Oslo', lat: 59.91, lon: 10.75 }, severe: true, alerts: [{ title: 'Storm warning' }] }),
      200,
    );
    expectStatus(
      await agent('draft-message', { message: 'Storm tonight from 20:00. Stay indoors.', recipients: ['+4712345678', '+4798765432'] }),
      200,
    );

    const card = page.getByTestId('human-step');
    await card.waitFor();
    await expect(card.textContent()).resolves.toContain('Severe-weather alert by SMS');
    await expect(card.getByRole('link', { name: sessionId }).isVisible()).resolves.toBe(true);
    await expect(card.getByText(/^Due in /).isVisible()).resolves.toBe(true);
    await expect(page.evaluate(() => (globalThis as { e2eMarker?: string }).e2eMarker)).resolves.toBe('not reloaded');
    // The person sees what they approve: the drafted text and the recipients (with their count),
    // from the cookbook's context declaration, as readable fields rather than JSON.
    const context = card.getByTestId('step-context');
    await context.getByText('Storm tonight from 20:00. Stay indoors.').waitFor();
    await context.getByText('Recipients (2)').waitFor();
    await expect(context.getByRole('listitem').allTextContents()).resolves.toEqual(expect.arrayContaining(['+4712345678', '+4798765432']));
    await expect(context.textContent()).resolves.toContain('Oslo');
    await expect(context.textContent()).resolves.not.toContain('{"');
    await docScreenshot(page, 'inbox');

    // The form is generated from the step's inputSchema: a required boolean and optional strings.
    await card.getByLabel(/^Approved/).check();
    await card.getByLabel(/^Note/).fill('Wording checked against the forecast.');
    await card.getByRole('button', { name: 'Complete step' }).click();
    await page.getByText('is complete. The session continues.').waitFor();
    await page.getByText('Nothing needs you right now').waitFor();

    const after = await call(`/api/v1/cookbooks/sessions/${sessionId}`, { key: firstKey });
    expectStatus(after, 200);
    expect(after.body.session).toMatchObject({ status: 'running', currentStep: 'send-sms', progress: { completed: 3, total: 4 } });
    const approval = (after.body.session as { steps: { stepId: string; status: string; resultData: unknown }[] }).steps.find(
      (s) => s.stepId === 'approve-wording',
    );
    expect(approval).toMatchObject({ status: 'completed', resultData: { approved: true, note: 'Wording checked against the forecast.' } });
  });

  it('lists the session with its progress, shows its event history and links its workflow in the Temporal UI', async () => {
    await nav('Sessions').click();
    const active = page.getByRole('table', { name: 'Active sessions' }).getByTestId('session-row').filter({ hasText: sessionId });
    await active.getByText('3 of 4 steps').waitFor();
    await active.getByRole('link', { name: 'weather-alert-sms' }).click();
    await page.getByTestId('session-status').getByText('Running').waitFor();
    await page.getByTestId('session-events').getByText('Completed by a person: ').waitFor();
    // Who completed each step: the agent's key by name, the approval by the signed-in person's email.
    const outcomes = await page.getByTestId('step-outcome').allTextContents();
    expect(outcomes[0]).toMatch(/^Completed with the key named “default”/);
    expect(outcomes[2]).toContain(`by ${email}`);
    const link = page.getByRole('link', { name: 'Open workflow in Temporal UI' });
    await expect(link.getAttribute('href')).resolves.toBe(
      `${app.deps.settings.TEMPORAL_UI_URL}/namespaces/default/workflows/cookbook-session-${sessionId}`,
    );
    // The agent finishes; the page follows without a reload.
    const last = await call(`/api/v1/cookbooks/sessions/${sessionId}/complete-step`, {
      method: 'POST',
      key: firstKey,
      body: { stepId: 'send-sms', resultData: { messageIds: ['SM1'] } },
    });
    expectStatus(last, 200);
    await page.getByTestId('session-events').getByText('Session completed').waitFor();
    await page.getByTestId('session-status').getByText('Completed').waitFor();
    // Ended sessions stay listed under Recent.
    await nav('Sessions').click();
    const recent = page.getByRole('table', { name: 'Recent sessions' }).getByTestId('session-row').filter({ hasText: sessionId });
    await recent.getByText('Completed').waitFor();
  });

  it('completes a human step whose form is a list of choices (array of objects with an enum)', async () => {
    const selectedApis = { payments: await createTestApi(app.deps.sql, 'payments'), email: await createTestApi(app.deps.sql, 'email') };
    await nav('Inbox').click();
    await page.getByText('Nothing needs you right now').waitFor();
    const started = await call('/api/v1/cookbooks/invoice-overdue-followup/start', { method: 'POST', key: firstKey, body: { selectedApis } });
    expectStatus(started, 201);
    const invoiceSession = (started.body.session as { sessionId: string }).sessionId;
    const invoices = [
      { invoiceId: 'in_1', customer: 'Acme', amountDueCents: 12000, daysOverdue: 14 },
      { invoiceId: 'in_2', customer: 'Globex', amountDueCents: 5000, daysOverdue: 3 },
    ];
    const found = await call(`/api/v1/cookbooks/sessions/${invoiceSession}/complete-step`, {
      method: 'POST',
      key: firstKey,
      body: { stepId: 'find-overdue', resultData: { invoices } },
    });
    expectStatus(found, 200);

    const card = page.getByTestId('human-step').filter({ hasText: 'Follow up on overdue invoices' });
    await card.waitFor();
    const first = card.getByRole('group', { name: 'Decisions 1' });
    await first.getByLabel(/^Invoice Id/).fill('in_1');
    await first.getByLabel(/^Action/).selectOption('remind');
    await card.getByRole('button', { name: 'Add to Decisions' }).click();
    const second = card.getByRole('group', { name: 'Decisions 2' });
    await second.getByLabel(/^Invoice Id/).fill('in_2');
    await second.getByLabel(/^Action/).selectOption('call');
    await card.getByRole('button', { name: 'Complete step' }).click();
    await page.getByText('is complete. The session continues.').waitFor();

    const after = await call(`/api/v1/cookbooks/sessions/${invoiceSession}`, { key: firstKey });
    expectStatus(after, 200);
    expect(after.body.session).toMatchObject({ status: 'running', currentStep: 'send-reminders' });
    const choice = (after.body.session as { steps: { stepId: string; resultData: unknown }[] }).steps.find((s) => s.stepId === 'choose-actions');
    expect(choice?.resultData).toEqual({
      decisions: [
        { invoiceId: 'in_1', action: 'remind' },
        { invoiceId: 'in_2', action: 'call' },
      ],
    });
  });

  /** A weather-alert session started with the agent's key, at its human step. */
  const weatherSessionAtApproval = () => weatherSessionAtApprovalOf(call, app.deps.sql, firstKey);

  it('rejects a human step: the session ends completed with outcome rejected and the alert is never sent', async () => {
    await nav('Inbox').click();
    const id = await weatherSessionAtApproval();
    const card = page.getByTestId('human-step').filter({ hasText: `Gale warning ${id}.` });
    await card.waitFor();
    await card
      .getByTestId('decision-panel')
      .getByLabel(/^Your note to the agent/)
      .fill('Too alarming for a gale.');
    await card.getByRole('button', { name: 'Reject' }).click();
    await page.getByText('was rejected. The session ends without the remaining steps.').waitFor();

    const after = await call(`/api/v1/cookbooks/sessions/${id}`, { key: firstKey });
    expectStatus(after, 200);
    expect(after.body.session).toMatchObject({ status: 'completed', outcome: 'rejected', currentStep: null, progress: { completed: 3, total: 4 } });
    const steps = (after.body.session as { steps: { stepId: string; status: string; decision: string | null; note: string | null }[] }).steps;
    expect(steps.find((s) => s.stepId === 'approve-wording')).toMatchObject({
      status: 'completed',
      decision: 'reject',
      note: 'Too alarming for a gale.',
    });
    expect(steps.find((s) => s.stepId === 'send-sms')).toMatchObject({ status: 'upcoming' });
    const log = await call(`/api/v1/cookbooks/sessions/${id}/event-log`, { key: firstKey });
    expect((log.body.events as { event: string; data: Record<string, unknown> }[]).slice(-2)).toMatchObject([
      { event: 'human_step.rejected', data: { stepId: 'approve-wording', note: 'Too alarming for a gale.' } },
      { event: 'session.completed', data: { outcome: 'rejected' } },
    ]);
    await page.goto(`${base}/sessions/${id}`);
    await page.getByTestId('session-status').getByText('Rejected by a person').waitFor();
    await page
      .getByTestId('step-outcome')
      .filter({ hasText: `Rejected by ${email}` })
      .waitFor();
  });

  it('requests changes: the session goes back to the drafting step with the note, and the redraft reaches the person again', async () => {
    await nav('Inbox').click();
    const id = await weatherSessionAtApproval();
    const card = page.getByTestId('human-step').filter({ hasText: `Gale warning ${id}.` });
    await card.waitFor();
    // Without a note the button stays off: the agent must be told what to change.
    await expect(card.getByRole('button', { name: 'Request changes' }).isDisabled()).resolves.toBe(true);
    await card
      .getByTestId('decision-panel')
      .getByLabel(/^Your note to the agent/)
      .fill('Say when it starts.');
    await card.getByRole('button', { name: 'Request changes' }).click();
    await page.getByText('Changes requested: the session goes back to “Draft the SMS wording”.').waitFor();

    // The agent sees the note on its current step and drafts again.
    const current = await call(`/api/v1/cookbooks/sessions/${id}/step`, { key: firstKey });
    expectStatus(current, 200);
    expect(current.body.step).toMatchObject({
      stepId: 'draft-message',
      status: 'pending',
      feedback: { fromStepId: 'approve-wording', note: 'Say when it starts.' },
    });
    const redraft = await call(`/api/v1/cookbooks/sessions/${id}/complete-step`, {
      method: 'POST',
      key: firstKey,
      body: { stepId: 'draft-message', resultData: { message: `Gale from 18:00 ${id}.`, recipients: ['+4712345678'] } },
    });
    expectStatus(redraft, 200);
    expect(redraft.body.session).toMatchObject({ status: 'waiting_for_human', currentStep: 'approve-wording', progress: { completed: 2, total: 4 } });
    const again = page.getByTestId('human-step').filter({ hasText: `Gale from 18:00 ${id}.` });
    await again.waitFor();
    await again.getByLabel(/^Approved/).check();
    await again.getByRole('button', { name: 'Complete step' }).click();
    await page.getByText('is complete. The session continues.').waitFor();
    const events = ((await call(`/api/v1/cookbooks/sessions/${id}/event-log`, { key: firstKey })).body.events as { event: string }[]).map(
      (e) => e.event,
    );
    expect(events.filter((name) => name === 'human_step.changes_requested')).toHaveLength(1);
    expect(events.filter((name) => name === 'human_step.pending')).toHaveLength(2);
  });

  it("asks the server for each page's data once when the page opens", async () => {
    // A full load of each page, then a quiet moment (shorter than the pages' 5 s polling): every GET
    // the page makes is counted by address. A development build's StrictMode, or an effect that
    // runs twice, would ask twice. The pages that follow event streams may re-read what the events
    // change once after a stream replays its history (it may hold events newer than the first
    // read), never once per replayed event.
    const rereadAfterReplay: Record<string, string[]> = {
      '/inbox': ['/api/v1/me/human-steps'],
      [`/sessions/${sessionId}`]: [`/api/v1/cookbooks/sessions/${sessionId}`, `/api/v1/cookbooks/sessions/${sessionId}/human-steps`],
    };
    const pages = ['/', '/keys', '/connections', '/inbox', '/sessions', '/directory', '/approvers', '/webhooks', `/sessions/${sessionId}`];
    // Three tabs of the same signed-in context at a time share one quiet moment (a browser opens six
    // connections to a host, and the pages that follow event streams hold one each).
    // Each time a page's event stream connects it replays its history, so a stream that reconnected (on a loaded
    // host, a stream can drop and its EventSource open it again) allows one more re-read: one per connection. One
    // more is allowed for a live event of the account's sessions landing in the quiet moment (a fresh clone's run
    // once saw the inbox read its human steps three times; which of the two it was is not known).
    const openCounting = async (path: string) => {
      const tab = await page.context().newPage();
      const asked: string[] = [];
      let streams = 0;
      tab.on('request', (request) => {
        const url = new URL(request.url());
        if (request.method() !== 'GET' || !url.pathname.startsWith('/api/')) return;
        if (url.pathname.endsWith('/events')) streams += 1;
        else asked.push(url.pathname + url.search);
      });
      await tab.goto(`${base}${path}`);
      await tab.locator('h1').first().waitFor();
      return { path, tab, asked, streams: () => streams };
    };
    for (let at = 0; at < pages.length; at += 3) {
      const opened = await Promise.all(pages.slice(at, at + 3).map(openCounting));
      await page.waitForTimeout(2_500);
      for (const { path, tab, asked, streams } of opened) {
        await tab.close();
        const counts = [...asked.reduce((tally, url) => tally.set(url, (tally.get(url) ?? 0) + 1), new Map<string, number>())];
        expect(asked.length, `${path} asked nothing`).toBeGreaterThan(0);
        const allowed = (url: string) => (rereadAfterReplay[path]?.includes(url) ? 2 + Math.max(1, streams()) : 1);
        expect(
          counts.filter(([url, hits]) => hits > allowed(url)),
          `${path}: ${JSON.stringify(counts)}, ${streams()} event stream connection(s)`,
        ).toEqual([]);
      }
    }
    // Three rounds with a 2.5 s quiet moment each.
  });

  it('signs out, after which the old session cookie no longer works', async () => {
    const cookies = await browser.context.cookies(base);
    const session = cookies.find((c) => c.httpOnly);
    expect(session, JSON.stringify(cookies.map((c) => c.name))).toBeDefined();
    const cookie = cookies.map((c) => `${c.name}=${c.value}`).join('; ');
    expectStatus(await call('/api/auth/session', { cookie }), 200);

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    expect((await browser.context.cookies(base)).find((c) => c.name === session!.name)).toBeUndefined();
    expectStatus(await call('/api/auth/session', { cookie }), 401);
    expectStatus(await call('/api/v1/keys', { cookie }), 401);
  });

  it('tells a person who tries too many sign-ins how long to wait', async () => {
    await page.goto(`${base}/signin`);
    const stranger = `${uniqueId('nobody')}@example.test`;
    const alert = page.getByRole('alert');
    for (let attempt = 0; attempt < 8; attempt += 1) {
      await page.getByLabel('Email', { exact: true }).fill(stranger);
      await page.getByLabel('Password', { exact: true }).fill(`wrong password ${attempt}`);
      const answered = page.waitForResponse((res) => res.url().endsWith('/api/auth/login'));
      await page.getByRole('button', { name: 'Sign in' }).click();
      const status = (await answered).status();
      if (status === 429) break;
      expect(status).toBe(401);
      await alert.filter({ hasText: 'The email or password is wrong' }).waitFor();
    }
    await alert.filter({ hasText: 'Too many attempts' }).waitFor();
    await expect(alert.textContent()).resolves.toMatch(/^Too many attempts\. Wait \d+ seconds, then try again\.$/);
  });

  it('ran without a script error in any page', async () => {
    // The test before spent this address's sign-in budget (sign-up signs in too): the signed-out pages,
    // and in a full run every page the earlier tests opened.
    await expectNoScriptErrors(browser, signedOutPages(base));
  });
});
