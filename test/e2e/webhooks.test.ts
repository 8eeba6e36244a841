import type { IncomingHttpHeaders } from 'node:http';
import type { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Page } from 'playwright-core';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { createRedis } from '#core/platform';
import { WEBHOOK_EVENT_TYPES } from '#core/notifications';
import {
  type RunningBrowser,
  docScreenshot,
  freePort,
  launchBrowser,
  refreshUntil,
  screenshotOnFailure,
  signUpInBrowser,
  expectNoScriptErrors,
  asNewOwner,
  BROWSER_TEST_TIMEOUT_MS,
} from '../helpers/browser.js';
import { edgeClient, expectStatus } from '../helpers/edge-client.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';
import { startUpstream, type TestUpstream } from '../helpers/upstream.js';
import { startWebhookWorker } from '../helpers/webhooks.js';

interface Received {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
}

/**
 * The Webhooks page in a real browser (Debian's Chromium via playwright-core) against a real
 * listening edge, Postgres, Redis, the webhook queue's delivery processor on a BullMQ worker of
 * this file's own, and a receiver on 127.0.0.1 that records what arrives and answers per path. The
 * owner adds an endpoint, reads its secret once from the page and verifies real deliveries with it
 * (the `standardwebhooks` package); a failing receiver shows in the delivery log and is retried
 * from it; the secret is rotated; the endpoint is disabled and deleted. Steps run in order and
 * share one page.
 */
describe('webhooks in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const redisPrefix = uniqueId('whke2e');
  const email = `${uniqueId('owner')}@example.test`;
  const password = 'correct horse battery staple';
  const hookPath = '/hooks/service';
  const description = 'e2e receiver';
  let app: FastifyInstance;
  let base: string;
  let workerRedis: Redis;
  let worker: Worker;
  let receiver: TestUpstream;
  let browser: RunningBrowser;
  let page: Page;
  let ownerKey = '';
  let secret = '';
  let endpointId = '';
  /** Every request the receiver got, in order. */
  const received: Received[] = [];
  /** Per path: the status code the receiver answers (200 when unset). */
  const answers = new Map<string, number>();

  /** JSON calls with the owner's key. */
  const call = edgeClient(
    () => base,
    () => ownerKey,
  );
  const nav = (label: string) => page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: label, exact: true });
  const at = (path: string) => received.filter((r) => r.path === path);
  const verify = (key: string, request: Received) =>
    new Webhook(key).verify(request.body, {
      'webhook-id': String(request.headers['webhook-id']),
      'webhook-timestamp': String(request.headers['webhook-timestamp']),
      'webhook-signature': String(request.headers['webhook-signature']),
    }) as { type: string; timestamp: string; data: Record<string, unknown> };
  /** Waits until the receiver has had `count` requests at the endpoint's path. */
  const receivedCount = (count: number) => expect.poll(() => at(hookPath).length, { timeout: 15_000 }).toBeGreaterThanOrEqual(count);
  const row = () => page.getByTestId('webhook-row').filter({ hasText: description });
  const deliveryRows = () => row().getByTestId('delivery-row');
  beforeAll(async () => {
    receiver = await startUpstream((req, res, seen) => {
      const path = req.url ?? '/';
      received.push({ path, headers: req.headers, body: seen.body?.toString('utf8') ?? '' });
      const status = answers.get(path) ?? 200;
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(status === 200 ? 'ok' : 'receiver is down');
    });
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    app = await buildApp(
      testEdgeSettings({
        PORT: String(port),
        PUBLIC_URL: base,
        REDIS_PREFIX: redisPrefix,
        // http://127.0.0.1 receivers are allowed (in production endpoints must be https on public hosts).
        ALLOW_PRIVATE_UPSTREAMS: 'true',
        // Short backoff and few attempts, so retries and giving up happen within the test.
        WEBHOOK_RETRY_BASE_MS: '50',
        WEBHOOK_ATTEMPTS: '3',
      }),
    );
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    worker = startWebhookWorker({ sql: app.deps.sql, redis: workerRedis, redisPrefix });
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
  }, 90_000);

  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await worker?.close();
    await workerRedis?.quit();
    await receiver?.close();
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `webhooks-${task.name}`));
  });

  it('the owner adds an endpoint for chosen event types; its signing secret is shown once', async () => {
    ownerKey = await signUpInBrowser(page, base, email, password);
    expect(ownerKey).toMatch(/^service_sk_[0-9a-f]{48}$/);

    await nav('Webhooks').click();
    await page.getByRole('heading', { name: 'Webhooks', exact: true }).waitFor();
    expect(new URL(page.url()).pathname).toBe('/webhooks');
    await page.getByText('No endpoints yet').waitFor();

    // At 1280 px the top bar stays one row with the eighth link: every link and the account on one line.
    const navBoxes = await page
      .getByRole('navigation', { name: 'Main' })
      .getByRole('link')
      .evaluateAll((links) => links.map((link) => link.getBoundingClientRect().top));
    expect(navBoxes).toHaveLength(8);
    expect(new Set(navBoxes).size, `nav link tops: ${navBoxes.join(', ')}`).toBe(1);
    const linkBox = (await nav('Webhooks').boundingBox())!;
    const signOutBox = (await page.getByRole('button', { name: 'Sign out' }).boundingBox())!;
    const middle = signOutBox.y + signOutBox.height / 2;
    expect(middle).toBeGreaterThan(linkBox.y);
    expect(middle).toBeLessThan(linkBox.y + linkBox.height);

    // Every event type the API knows is offered once, in its group, with a description.
    const names = await page
      .getByRole('checkbox')
      .evaluateAll((boxes) => boxes.map((box) => box.closest('label')?.querySelector('code')?.textContent ?? ''));
    expect([...names].sort()).toEqual([...WEBHOOK_EVENT_TYPES].sort());
    for (const [group, type] of [
      ['Money', 'balance.low'],
      ['Human steps', 'human_step.pending'],
      ['Sessions', 'session.completed'],
      ['Keys', 'key.revoked'],
    ] as const) {
      await expect(
        page
          .getByRole('group', { name: group, exact: true })
          .getByRole('checkbox', { name: new RegExp(`^${type.replace('.', '\\.')} `) })
          .count(),
      ).resolves.toBe(1);
    }

    await page.getByLabel('Endpoint URL').fill(`${receiver.url}${hookPath}`);
    await page.getByLabel('Description').fill(description);
    // Without an event type the form says so and nothing is created.
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    await page.getByRole('alert').filter({ hasText: 'Choose at least one event type' }).waitFor();
    expect((await call('/api/v1/webhooks')).body.webhooks).toEqual([]);

    await page.getByRole('checkbox', { name: /^key\.revoked / }).check();
    await page.getByRole('checkbox', { name: /^webhook\.test / }).check();
    await page.getByRole('button', { name: 'Add endpoint' }).click();
    const reveal = page.getByRole('region', { name: 'Signing secret of the new endpoint' });
    secret = (await reveal.getByTestId('webhook-secret').textContent())?.trim() ?? '';
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/=]{32}$/);
    await expect(reveal.textContent()).resolves.toContain("It won't be shown again");
    for (const header of ['webhook-id', 'webhook-timestamp', 'webhook-signature'])
      await expect(reveal.getByText(header, { exact: true }).count()).resolves.toBeGreaterThan(0);
    await expect(reveal.getByRole('button', { name: 'Copy secret' }).isVisible()).resolves.toBe(true);

    await row().getByText('Enabled', { exact: true }).waitFor();
    await expect(row().textContent()).resolves.toContain(`${receiver.url}${hookPath}`);
    await expect(row().getByText('no successful delivery yet').isVisible()).resolves.toBe(true);
    const listed = await call('/api/v1/webhooks');
    expectStatus(listed, 200);
    const webhooks = listed.body.webhooks as { id: string; url: string; eventTypes: string[]; status: string; description: string }[];
    expect(webhooks).toEqual([expect.objectContaining({ url: `${receiver.url}${hookPath}`, description, status: 'enabled' })]);
    expect([...webhooks[0]!.eventTypes].sort()).toEqual(['key.revoked', 'webhook.test']);
    endpointId = webhooks[0]!.id;
    expect(listed.text).not.toContain(secret);

    // After a reload the secret is gone from the page for good; the endpoint stays.
    await page.reload();
    await row().waitFor();
    await expect(page.getByTestId('webhook-secret').count()).resolves.toBe(0);
    expect(await page.content()).not.toContain(secret);
  });

  it('"Send test event" reaches the receiver signed with that secret, and the log shows it succeeded', async () => {
    await row()
      .getByRole('button', { name: `Send test event to ${description}`, exact: true })
      .click();
    await row().getByText('Test event queued').waitFor();
    await receivedCount(1);
    const first = at(hookPath)[0]!;
    expect(first.headers['content-type']).toBe('application/json');
    expect(verify(secret, first)).toMatchObject({ type: 'webhook.test' });
    expect(String(first.headers['webhook-signature']).split(' ')).toHaveLength(1);

    // The send opened the log; Refresh shows how the delivery went.
    const log = row().getByTestId('delivery-log');
    await log.waitFor();
    await refreshUntil(
      () => row().getByRole('button', { name: 'Refresh', exact: true }),
      deliveryRows().first().getByText('Succeeded', { exact: true }),
    );
    const delivered = deliveryRows().first();
    await expect(delivered.getByText('webhook.test', { exact: true }).isVisible()).resolves.toBe(true);
    await expect(delivered.getByTestId('delivery-attempts').textContent()).resolves.toBe('1');
    await expect(delivered.getByTestId('delivery-answer').textContent()).resolves.toBe('HTTP 200');
    await row()
      .getByText(/last success /)
      .waitFor();

    // The endpoint listens to key.revoked: revoking a key sends one, which the log lists too.
    const key = await call('/api/v1/keys', { method: 'POST', body: { name: 'to revoke' } });
    expectStatus(key, 201);
    expectStatus(await call(`/api/v1/keys/${(key.body.key as { id: string }).id}`, { method: 'DELETE' }), 200);
    await receivedCount(2);
    expect(verify(secret, at(hookPath)[1]!)).toMatchObject({ type: 'key.revoked', data: { name: 'to revoke' } });
    await refreshUntil(
      () => row().getByRole('button', { name: 'Refresh', exact: true }),
      deliveryRows().filter({ hasText: 'key.revoked' }).getByText('Succeeded', { exact: true }),
    );
    await expect(deliveryRows().count()).resolves.toBe(2);
  });

  it('a receiver answering 500 shows as failed after 3 attempts; once it recovers, Retry on that row succeeds', async () => {
    answers.set(hookPath, 500);
    const before = at(hookPath).length;
    await row()
      .getByRole('button', { name: `Send test event to ${description}`, exact: true })
      .click();
    await receivedCount(before + 3);
    const failedIds = new Set(
      at(hookPath)
        .slice(before)
        .map((r) => String(r.headers['webhook-id'])),
    );
    expect(failedIds.size).toBe(1);

    const failed = deliveryRows().first();
    await refreshUntil(() => row().getByRole('button', { name: 'Refresh', exact: true }), failed.getByText('Failed', { exact: true }));
    await expect(failed.getByText('webhook.test', { exact: true }).isVisible()).resolves.toBe(true);
    await expect(failed.getByTestId('delivery-attempts').textContent()).resolves.toBe('3');
    await expect(failed.getByTestId('delivery-answer').textContent()).resolves.toContain('HTTP 500');
    expect(at(hookPath)).toHaveLength(before + 3);

    // Nothing reached the endpoint since that delivery was created, so the server disabled it: the
    // page says why, and retrying waits until it is enabled again.
    await refreshUntil(() => row().getByRole('button', { name: 'Refresh', exact: true }), row().getByTestId('disabled-reason'));
    await expect(row().getByTestId('disabled-reason').textContent()).resolves.toContain('HTTP 500');
    await expect(row().getByText('Disabled', { exact: true }).isVisible()).resolves.toBe(true);
    await expect(failed.getByRole('button', { name: /^Retry/ }).isDisabled()).resolves.toBe(true);
    await expect(
      row()
        .getByRole('button', { name: `Send test event to ${description}`, exact: true })
        .isDisabled(),
    ).resolves.toBe(true);

    answers.set(hookPath, 200);
    await row()
      .getByRole('button', { name: `Enable ${description}`, exact: true })
      .click();
    await row().getByText('Enabled', { exact: true }).waitFor();
    await expect(row().getByTestId('disabled-reason').count()).resolves.toBe(0);
    await failed.getByRole('button', { name: /^Retry/ }).click();
    await row().getByText('queued again, with the same webhook-id').waitFor();
    await receivedCount(before + 4);
    const retried = at(hookPath)[before + 3]!;
    expect(failedIds.has(String(retried.headers['webhook-id']))).toBe(true);
    expect(verify(secret, retried)).toMatchObject({ type: 'webhook.test' });
    await refreshUntil(() => row().getByRole('button', { name: 'Refresh', exact: true }), failed.getByText('Succeeded', { exact: true }));
    await expect(failed.getByTestId('delivery-answer').textContent()).resolves.toBe('HTTP 200');
    await expect(failed.getByTestId('delivery-attempts').textContent()).resolves.toBe('4');

    const log = await call(`/api/v1/webhooks/${endpointId}/deliveries`);
    expect((log.body.deliveries as { status: string }[]).map((d) => d.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
  });

  it('rotating the secret shows the new one once; the next delivery carries two signatures and verifies with the new secret', async () => {
    await row().getByRole('button', { name: 'Rotate secret', exact: true }).click();
    await row().getByRole('group').getByText('the old one keeps working for 24 hours').waitFor();
    await row().getByRole('button', { name: 'Yes, rotate' }).click();
    const reveal = row().getByRole('region', { name: `New signing secret of ${description}` });
    const rotated = (await reveal.getByTestId('webhook-secret').textContent())?.trim() ?? '';
    expect(rotated).toMatch(/^whsec_[A-Za-z0-9+/=]{32}$/);
    expect(rotated).not.toBe(secret);
    await expect(reveal.textContent()).resolves.toContain('The old one keeps working for 24 hours');
    await expect(reveal.textContent()).resolves.toContain("It won't be shown again");

    const before = at(hookPath).length;
    await row()
      .getByRole('button', { name: `Send test event to ${description}`, exact: true })
      .click();
    await receivedCount(before + 1);
    const request = at(hookPath)[before]!;
    expect(String(request.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(verify(rotated, request).type).toBe('webhook.test');
    // A receiver still holding the old secret verifies it too, for the 24 hours.
    expect(verify(secret, request).type).toBe('webhook.test');
    expect(() => verify(rotated, { ...request, body: request.body.replace('webhook.test', 'webhook.tampered') })).toThrow();

    await reveal.getByRole('button', { name: /I have stored it/ }).click();
    await expect(page.getByTestId('webhook-secret').count()).resolves.toBe(0);
    await refreshUntil(
      () => row().getByRole('button', { name: 'Refresh', exact: true }),
      deliveryRows().first().getByText('Succeeded', { exact: true }),
    );
    await expect(deliveryRows().count()).resolves.toBe(4);
    // From the top, so the sticky top bar sits at the top of the full-page picture.
    await page.evaluate('window.scrollTo(0, 0)');
    await docScreenshot(page, 'webhooks');
  });

  it('"Load more" pages through a long log', async () => {
    // 22 more test events over the API: the log shows 20 at first, then the rest.
    const before = at(hookPath).length;
    for (let i = 0; i < 22; i += 1) expectStatus(await call(`/api/v1/webhooks/${endpointId}/test`, { method: 'POST' }), 202);
    await row().getByRole('button', { name: 'Refresh', exact: true }).click();
    await expect.poll(() => deliveryRows().count()).toBe(20);
    await row().getByRole('button', { name: 'Load more' }).click();
    await expect.poll(() => deliveryRows().count()).toBe(26);
    await expect(row().getByRole('button', { name: 'Load more' }).count()).resolves.toBe(0);
    // The oldest, at the end, is the first test event.
    await expect(deliveryRows().last().getByTestId('delivery-attempts').textContent()).resolves.toBe('1');
    await expect(deliveryRows().last().getByText('webhook.test', { exact: true }).isVisible()).resolves.toBe(true);
    await receivedCount(before + 22);
  });

  it('the owner disables the endpoint, then deletes it after confirming', async () => {
    await row()
      .getByRole('button', { name: `Disable ${description}`, exact: true })
      .click();
    await row().getByText('Disabled', { exact: true }).waitFor();
    await row().getByText('Disabled: disabled by the account.').waitFor();
    await expect(
      row()
        .getByRole('button', { name: `Send test event to ${description}`, exact: true })
        .isDisabled(),
    ).resolves.toBe(true);
    const listed = await call('/api/v1/webhooks');
    expect(listed.body.webhooks).toEqual([
      expect.objectContaining({ id: endpointId, status: 'disabled', disabledReason: 'disabled by the account' }),
    ]);
    // Disabled, nothing is sent: a revoked key's event does not reach the receiver.
    const before = at(hookPath).length;
    const key = await call('/api/v1/keys', { method: 'POST', body: { name: 'revoked while disabled' } });
    expectStatus(await call(`/api/v1/keys/${(key.body.key as { id: string }).id}`, { method: 'DELETE' }), 200);
    expect((await call(`/api/v1/webhooks/${endpointId}/deliveries?limit=200`)).body.deliveries).toHaveLength(26);

    await row().getByRole('button', { name: 'Delete', exact: true }).click();
    await row().getByRole('group').getByText(`Delete ${description}?`).waitFor();
    // Cancel keeps it; confirming deletes it.
    await row().getByRole('button', { name: 'Cancel' }).click();
    await expect(row().count()).resolves.toBe(1);
    await row().getByRole('button', { name: 'Delete', exact: true }).click();
    await row().getByRole('button', { name: 'Delete for good' }).click();
    await page.getByText(`The endpoint ${receiver.url}${hookPath} was deleted.`).waitFor();
    await page.getByText('No endpoints yet').waitFor();
    expect((await call('/api/v1/webhooks')).body.webhooks).toEqual([]);
    expectStatus(await call(`/api/v1/webhooks/${endpointId}/deliveries`), 404);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(at(hookPath)).toHaveLength(before);
  });

  it('ran without a script error in any page', async () => {
    await expectNoScriptErrors(browser, asNewOwner(base, ['Webhooks']));
  });
});
