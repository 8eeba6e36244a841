import type { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { loadCookbooks } from '#db/cookbooks';
import { createRedis } from '#core/platform';
import {
  type RunningBrowser,
  docScreenshot,
  freePort,
  launchBrowser,
  screenshotOnFailure,
  signUpInBrowser,
  expectNoScriptErrors,
  asNewOwner,
  BROWSER_TEST_TIMEOUT_MS,
} from '../helpers/browser.js';
import { edgeClient, expectStatus, weatherSessionAtApproval as weatherSessionAtApprovalOf } from '../helpers/edge-client.js';
import { startWorker, terminateRunningSessions, type RunningWorker } from '../helpers/cookbooks.js';
import { inviteLinkIn, recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';

/**
 * Approvers in a real browser (Debian's Chromium via playwright-core) against a real listening edge,
 * Postgres, Redis, a Temporal worker and an SMTP server of this file's own (the e-mail queue's
 * processor sends the invitation to it). The owner invites someone on the Approvers page; that
 * person opens the link from the e-mail in a browser context of their own, chooses a password and
 * sees only the inbox and sessions; the owner assigns an agent's human step to them, they approve
 * it; the owner removes them and they are signed out. Steps run in order and share both pages.
 */
describe('approvers in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const taskQueue = uniqueId('approvers-e2e-');
  const redisPrefix = uniqueId('apre2e');
  const ownerEmail = `${uniqueId('owner')}@example.test`;
  const approverEmail = `${uniqueId('approver')}@example.test`;
  const password = 'correct horse battery staple';
  const approverPassword = 'a long passphrase for approving';
  let app: FastifyInstance;
  let base: string;
  let mail: MailServer;
  let workerRedis: Redis;
  let emailWorker: Worker;
  let worker: RunningWorker;
  let browser: RunningBrowser;
  /** The owner's page (the browser's first context). */
  let page: Page;
  /** The approver's own browser context and page: separate cookies, as on another computer. */
  let approverContext: BrowserContext;
  let approverPage: Page;
  let ownerKey = '';
  let inviteLink = '';
  let sessionId = '';

  const call = edgeClient(() => base);
  const navOf = (on: Page) => on.getByRole('navigation', { name: 'Main' });
  const nav = (label: string) => navOf(page).getByRole('link', { name: label, exact: true });
  const invitationsTo = (email: string) => mail.messages.filter((message) => recipientOf(message).includes(email));

  /** A weather-alert session started with the owner's key (as an agent would), at its human step. */
  const weatherSessionAtApproval = () => weatherSessionAtApprovalOf(call, app.deps.sql, ownerKey);

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    mail = await startMailServer();
    app = await buildApp(
      testEdgeSettings({
        PORT: String(port),
        PUBLIC_URL: base,
        REDIS_PREFIX: redisPrefix,
        TEMPORAL_TASK_QUEUE: taskQueue,
        SSE_HEARTBEAT_MS: '1000',
      }),
    );
    await loadCookbooks(app.deps.sql);
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    // The invitation link names the listening edge, so the browser can open it.
    emailWorker = startEmailWorker({ sql: app.deps.sql, redis: workerRedis, redisPrefix, smtpUrl: mail.url, publicUrl: base });
    worker = await startWorker({ taskQueue, sql: app.deps.sql, redis: workerRedis, redisPrefix });
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
    ({ context: approverContext, page: approverPage } = await browser.newPerson());
  }, 90_000);

  afterAll(async () => {
    if (app) await terminateRunningSessions(app.deps.temporal.client, taskQueue);
    await browser?.close();
    await app?.close();
    await emailWorker?.close();
    await worker?.stop();
    await workerRedis?.quit();
    await mail?.close();
  });

  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(async () => {
      await screenshotOnFailure(page, `approvers-owner-${task.name}`);
      await screenshotOnFailure(approverPage, `approvers-approver-${task.name}`);
    });
  });

  it('the owner invites an approver on the Approvers page; the invitation arrives by e-mail and can be sent again', async () => {
    ownerKey = await signUpInBrowser(page, base, ownerEmail, password);
    expect(ownerKey).toMatch(/^service_sk_[0-9a-f]{48}$/);

    await nav('Approvers').click();
    await page.getByRole('heading', { name: 'Approvers', exact: true }).waitFor();
    await page.getByText('No approvers yet').waitFor();
    await expect(
      page.getByText(/to see and complete this account's human steps in the Inbox; they cannot see or change keys/).isVisible(),
    ).resolves.toBe(true);

    await page.getByLabel('Email address').fill(approverEmail);
    await page.getByRole('button', { name: 'Send invitation', exact: true }).click();
    await page.getByText(`Invitation sent to ${approverEmail}.`).waitFor();
    const row = page.getByTestId('approver-row').filter({ hasText: approverEmail });
    await row.getByText('Invited', { exact: true }).waitFor();
    await expect(row.getByText('not accepted yet').isVisible()).resolves.toBe(true);
    const listed = await call('/api/v1/members', { key: ownerKey });
    expectStatus(listed, 200);
    expect(listed.body.members).toEqual([expect.objectContaining({ email: approverEmail, status: 'invited', acceptedAt: null })]);

    const first = await mail.waitFor((message) => recipientOf(message).includes(approverEmail));
    // The owner's address is not verified, so the e-mail does not present it as the sender.
    expect(first.subject).toBe('You are invited to approve steps on Service');
    expect(first.text).not.toContain(ownerEmail);
    const firstLink = inviteLinkIn(first).link;
    expect(firstLink.startsWith(`${base}/accept-invite#token=`), firstLink).toBe(true);

    // Inviting the same address again is refused in words; the list still holds one approver.
    await page.getByLabel('Email address').fill(approverEmail);
    await page.getByRole('button', { name: 'Send invitation', exact: true }).click();
    await page
      .getByRole('alert')
      .filter({ hasText: `${approverEmail} is already invited to or an approver of this account` })
      .waitFor();
    await expect(page.getByTestId('approver-row').count()).resolves.toBe(1);

    // "Resend invitation" mails a fresh link; the first one stops working (checked in the next test).
    await row.getByRole('button', { name: `Resend invitation to ${approverEmail}` }).click();
    await page.getByText(`The invitation went to ${approverEmail} again.`).waitFor();
    await expect.poll(() => invitationsTo(approverEmail).length, { timeout: 15_000 }).toBe(2);
    inviteLink = inviteLinkIn(invitationsTo(approverEmail)[1]!).link;
    expect(inviteLink).not.toBe(firstLink);
    expect(inviteLink.startsWith(`${base}/accept-invite#token=`)).toBe(true);

    // The replaced link, opened in the approver's browser, says what to do.
    await approverPage.goto(firstLink);
    await approverPage.getByRole('heading', { name: 'Accept your invitation' }).waitFor();
    await approverPage.getByLabel('Password', { exact: true }).fill(approverPassword);
    await approverPage.getByRole('button', { name: 'Accept and sign in' }).click();
    const refused = approverPage.getByRole('alert');
    await refused.filter({ hasText: 'This invitation link no longer works' }).waitFor();
    await expect(refused.textContent()).resolves.toContain('Ask the account owner to send the invitation again.');
    await expect(approverPage.getByLabel('Password', { exact: true }).count()).resolves.toBe(0);
    // And an address without a token says so.
    await approverPage.goto(`${base}/accept-invite`);
    await approverPage.getByRole('alert').filter({ hasText: 'This address has no invitation in it.' }).waitFor();
  });

  it('the approver accepts in the browser, lands in the inbox and sees only the inbox and sessions', async () => {
    await approverPage.goto(inviteLink);
    await approverPage.getByRole('heading', { name: 'Accept your invitation' }).waitFor();
    await expect(approverPage.getByText('not your email and not a common password').isVisible()).resolves.toBe(true);
    // A password the policy refuses is explained, and the link still works afterwards.
    await approverPage.getByLabel('Password', { exact: true }).fill('password123');
    await approverPage.getByRole('button', { name: 'Accept and sign in' }).click();
    await approverPage.getByRole('alert').filter({ hasText: 'Password is too common.' }).waitFor();
    await approverPage.getByLabel('Password', { exact: true }).fill(approverPassword);
    await approverPage.getByRole('button', { name: 'Accept and sign in' }).click();

    await approverPage.getByRole('heading', { name: 'Inbox', exact: true }).waitFor();
    expect(new URL(approverPage.url()).pathname).toBe('/inbox');
    expect(approverPage.url()).not.toContain('token');
    await expect(navOf(approverPage).getByRole('link').allTextContents()).resolves.toEqual(['Inbox', 'Sessions']);
    await expect(approverPage.getByTestId('signed-in-email').textContent()).resolves.toBe(approverEmail);
    await expect(approverPage.getByText(`Approver for ${ownerEmail}`).isVisible()).resolves.toBe(true);

    // An owner's page shows the inbox instead, with a sentence saying why; no key is listed.
    await approverPage.goto(`${base}/keys`);
    await approverPage.getByRole('heading', { name: 'Inbox', exact: true }).waitFor();
    await approverPage.getByText('is for the account owner only. As an approver you see the Inbox and Sessions.').waitFor();
    expect(new URL(approverPage.url()).pathname).toBe('/inbox');
    await expect(approverPage.getByRole('heading', { name: 'Keys' }).count()).resolves.toBe(0);
    await expect(approverPage.getByRole('list', { name: 'API keys' }).count()).resolves.toBe(0);

    // The server refuses the approver's cookie on the owner's routes, CSRF token and all.
    // (A string: the root tsconfig has no DOM types; the page runs it as it stands.)
    const created = await approverPage.evaluate<{ status: number; body: { code?: string } }>(`(async () => {
      const csrf = document.cookie.split(';').map((part) => part.trim()).find((part) => part.startsWith('csrf_token='));
      const res = await fetch('/api/v1/keys', {
        method: 'POST',
        credentials: 'same-origin',
        headers: { 'content-type': 'application/json', accept: 'application/json', 'x-csrf-token': decodeURIComponent((csrf || '').slice('csrf_token='.length)) },
        body: JSON.stringify({ name: 'approver key' }),
      });
      return { status: res.status, body: await res.json() };
    })()`);
    expect(created.status, JSON.stringify(created.body)).toBe(403);
    expect(created).toMatchObject({ status: 403, body: { code: 'approver_forbidden' } });
    const keys = await call('/api/v1/keys', { key: ownerKey });
    expect((keys.body.keys as { name: string }[]).map((key) => key.name)).not.toContain('approver key');

    // The owner's list shows the approver as active.
    await page.reload();
    const row = page.getByTestId('approver-row').filter({ hasText: approverEmail });
    await row.getByText('Active', { exact: true }).waitFor();
    await expect(row.getByText(/accepted /).isVisible()).resolves.toBe(true);
    await expect(row.getByRole('button', { name: /Resend invitation/ }).count()).resolves.toBe(0);
    await docScreenshot(page, 'approvers');
  });

  it("the owner assigns an agent's human step to the approver, who approves it from a link in the browser", async () => {
    await nav('Inbox').click();
    sessionId = await weatherSessionAtApproval();
    const card = page.getByTestId('human-step').filter({ hasText: `Gale warning ${sessionId}.` });
    await card.waitFor();
    // Unassigned, the approver's inbox offers it to any approver (it arrives there too).
    await approverPage.goto(`${base}/inbox`);
    await approverPage
      .getByTestId('human-step')
      .filter({ hasText: `Gale warning ${sessionId}.` })
      .getByTestId('step-assignee')
      .filter({ hasText: 'Any approver can take this' })
      .waitFor();
    // The owner's card says who takes the step with the select itself: the first taker so far.
    const select = card.getByLabel('Assigned to');
    await expect(select.locator('option').allTextContents()).resolves.toEqual(['First taker (anyone)', approverEmail]);
    await expect(select.locator('option:checked').textContent()).resolves.toBe('First taker (anyone)');
    await select.selectOption({ label: approverEmail });
    await card
      .getByTestId('assignee-saved')
      .filter({ hasText: `Saved: ${approverEmail} takes this step; other approvers no longer see it.` })
      .waitFor();
    await expect
      .poll(async () => {
        const pending = await call('/api/v1/me/human-steps', { key: ownerKey });
        return (pending.body.humanSteps as { sessionId: string; assignee: { email: string } | null }[]).find((step) => step.sessionId === sessionId)
          ?.assignee?.email;
      })
      .toBe(approverEmail);
    // The choice survives a reload (it is the server's).
    await page.reload();
    await card.waitFor();
    await expect(card.getByLabel('Assigned to').locator('option:checked').textContent()).resolves.toBe(approverEmail);

    // The approver follows a link to the step (as e-mails will): it is scrolled to, focused and marked.
    await approverPage.goto(`${base}/inbox?session=${encodeURIComponent(sessionId)}&step=approve-wording`);
    const theirs = approverPage.getByTestId('human-step').filter({ hasText: `Gale warning ${sessionId}.` });
    await theirs.getByTestId('step-assignee').filter({ hasText: 'Assigned to you' }).waitFor();
    await expect(theirs.getAttribute('class')).resolves.toContain('human-step-target');
    await expect.poll(() => approverPage.evaluate<string | null>("document.activeElement?.getAttribute('data-testid') ?? null")).toBe('human-step');
    // Approvers do not assign.
    await expect(theirs.getByLabel('Assigned to').count()).resolves.toBe(0);

    await theirs.getByLabel(/^Approved/).check();
    await theirs.getByRole('button', { name: 'Complete step' }).click();
    await approverPage.getByText('is complete. The session continues.').waitFor();
    // The owner's inbox drops the step live.
    await card.waitFor({ state: 'detached' });

    const after = await call(`/api/v1/cookbooks/sessions/${sessionId}`, { key: ownerKey });
    expectStatus(after, 200);
    expect(after.body.session).toMatchObject({ status: 'running', currentStep: 'send-sms' });
    const approval = (
      after.body.session as { steps: { stepId: string; status: string; completedByName: string | null; resultData: unknown }[] }
    ).steps.find((step) => step.stepId === 'approve-wording');
    expect(approval).toMatchObject({ status: 'completed', completedByName: approverEmail, resultData: { approved: true } });

    // The approver's session page names them, and links no owner-only directory page.
    await navOf(approverPage).getByRole('link', { name: 'Sessions', exact: true }).click();
    await approverPage
      .getByRole('table', { name: 'Active sessions' })
      .getByTestId('session-row')
      .filter({ hasText: sessionId })
      .getByRole('link')
      .click();
    await approverPage
      .getByTestId('step-outcome')
      .filter({ hasText: `by ${approverEmail}` })
      .waitFor();
    await expect(approverPage.locator('a[href^="/directory"]').count()).resolves.toBe(0);
  });

  it('one login, two accounts: the approver opens an account of their own and switches between the two in the header', async () => {
    // No switcher while the person belongs to one account.
    await expect(approverPage.getByRole('combobox', { name: 'Account' }).count()).resolves.toBe(0);
    // They register an account of their own with the password they sign in with (as a program would).
    const registered = await call('/api/v1/register', { method: 'POST', body: { email: approverEmail, password: approverPassword } });
    expectStatus(registered, 201);

    await approverPage.goto(`${base}/inbox`);
    const switcher = approverPage.getByRole('combobox', { name: 'Account' });
    await switcher.waitFor();
    await expect(switcher.locator('option').allTextContents()).resolves.toEqual([`Your account (${approverEmail})`, `Approver for ${ownerEmail}`]);
    await expect(switcher.locator('option:checked').textContent()).resolves.toBe(`Approver for ${ownerEmail}`);
    await switcher.selectOption({ label: `Your account (${approverEmail})` });
    await approverPage.getByRole('heading', { name: 'Overview' }).waitFor();
    await expect(navOf(approverPage).getByRole('link', { name: 'Keys', exact: true }).count()).resolves.toBe(1);
    await expect(approverPage.locator('.account-role').count()).resolves.toBe(0);

    await approverPage.getByRole('combobox', { name: 'Account' }).selectOption({ label: `Approver for ${ownerEmail}` });
    await approverPage.getByRole('heading', { name: 'Inbox', exact: true }).waitFor();
    await expect(navOf(approverPage).getByRole('link').allTextContents()).resolves.toEqual(['Inbox', 'Sessions']);
  });

  it('the owner removes the approver, who is signed out at once and keeps only their own account', async () => {
    const cookie = (await approverContext.cookies(base)).map((c) => `${c.name}=${c.value}`).join('; ');
    expectStatus(await call('/api/auth/session', { cookie }), 200);

    await nav('Approvers').click();
    const row = page.getByTestId('approver-row').filter({ hasText: approverEmail });
    await row.getByRole('button', { name: 'Remove' }).click();
    await row.getByRole('group').getByText(`Remove ${approverEmail}?`).waitFor();
    await row.getByRole('button', { name: 'Yes, remove' }).click();
    await page.getByText(`${approverEmail} is no longer an approver.`).waitFor();
    await page.getByText('No approvers yet').waitFor();

    expectStatus(await call('/api/auth/session', { cookie }), 401);
    expectStatus(await call('/api/v1/me/human-steps', { cookie }), 401);
    // Without a reload: the Inbox's next refresh (every 5 s) answers 401, the session check agrees, and the page signs out.
    await approverPage.getByRole('heading', { name: 'Sign in' }).waitFor();
    await approverPage.getByLabel('Email', { exact: true }).fill(approverEmail);
    await approverPage.getByLabel('Password', { exact: true }).fill(approverPassword);
    await approverPage.getByRole('button', { name: 'Sign in' }).click();
    // Their own account opens (on the page they were on: the owner's navigation); the owner's account
    // is gone from their login, and with it the switcher.
    await navOf(approverPage).getByRole('link', { name: 'Keys', exact: true }).waitFor();
    await expect(approverPage.getByRole('combobox', { name: 'Account' }).count()).resolves.toBe(0);
    const me = await call('/api/auth/session', { cookie: (await approverContext.cookies(base)).map((c) => `${c.name}=${c.value}`).join('; ') });
    expect(me.body.accounts).toEqual([expect.objectContaining({ email: approverEmail, role: 'owner', current: true })]);

    // With no approvers left, the owner's inbox offers no assignment and says nothing about approvers.
    await nav('Inbox').click();
    const id = await weatherSessionAtApproval();
    const card = page.getByTestId('human-step').filter({ hasText: `Gale warning ${id}.` });
    await card.waitFor();
    await expect(card.getByLabel('Assigned to').count()).resolves.toBe(0);
    await expect(card.getByTestId('step-assignee').count()).resolves.toBe(0);
  });

  it('ran without a script error in any page', async () => {
    await expectNoScriptErrors(browser, asNewOwner(base, ['Approvers', 'Inbox', 'Sessions']));
  });
});
