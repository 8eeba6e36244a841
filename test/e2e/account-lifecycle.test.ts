import type { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { ParsedMail } from 'mailparser';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { createRedis } from '#core/platform';
import { bearer, expectOk } from '../helpers/app.js';
import {
  expectNoScriptErrors,
  freePort,
  launchBrowser,
  screenshotOnFailure,
  signUpInBrowser,
  type RunningBrowser,
  BROWSER_TEST_TIMEOUT_MS,
} from '../helpers/browser.js';
import { inviteLinkIn, recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';

function linkIn(mail: ParsedMail, path: '/verify-email' | '/confirm-email'): string {
  const link = new RegExp(`https?://\\S+${path}#token=[A-Za-z0-9_-]+`).exec(mail.text ?? '')?.[0];
  if (!link) throw new Error(`no ${path} link in: ${mail.text}`);
  return link;
}

/**
 * The account's own life in a real browser (issue 33), one person in order on one page: they sign up
 * and verify the address from the e-mail (a resent link replaces the first), change the address
 * (confirmed from the new mailbox, the old one told), accept another owner's invitation with the same
 * login and switch between the two accounts in the header, and finally delete their account with
 * their password, giving up the balance left. E-mail goes over real SMTP from the e-mail queue.
 */
describe('account lifecycle in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const redisPrefix = uniqueId('acctlife');
  const firstEmail = `${uniqueId('person')}@example.test`;
  const secondEmail = `${uniqueId('moved')}@example.test`;
  const password = 'correct horse battery staple';
  let app: FastifyInstance;
  let base: string;
  let mail: MailServer;
  let workerRedis: Redis;
  let emailWorker: Worker;
  let browser: RunningBrowser;
  let page: Page;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    mail = await startMailServer();
    app = await buildApp(testEdgeSettings({ PORT: String(port), PUBLIC_URL: base, REDIS_PREFIX: redisPrefix, EMAIL_VERIFICATION: 'required' }));
    workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    emailWorker = startEmailWorker({ sql: app.deps.sql, redis: workerRedis, redisPrefix, smtpUrl: mail.url, publicUrl: base });
    await app.listen({ host: '127.0.0.1', port });
    browser = await launchBrowser();
    page = browser.page;
  }, 90_000);
  afterAll(async () => {
    await browser?.close();
    await app?.close();
    await emailWorker?.close();
    await workerRedis?.quit();
    await mail?.close();
  });
  beforeEach(({ task, onTestFailed }) => {
    onTestFailed(() => screenshotOnFailure(page, `account-lifecycle-${task.name}`));
  });

  const mailsTo = (email: string, subject: string) => mail.messages.filter((m) => recipientOf(m).includes(email) && m.subject === subject);
  const openSettings = async () => {
    await page.getByRole('link', { name: /^Settings, signed in as / }).click();
    await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
  };

  it('verifies the address from the e-mail; a resent link replaces the first', async () => {
    await signUpInBrowser(page, base, firstEmail, password);
    const banner = page.getByText('Verify your e-mail address: open the link we sent to');
    await banner.waitFor();
    await expect(banner.textContent()).resolves.toContain('not add funds or invite approvers');

    await openSettings();
    await page.getByTestId('email-state').filter({ hasText: 'Not verified' }).waitFor();
    await expect(page.getByTestId('email-state').textContent()).resolves.toContain(firstEmail);
    await page.getByRole('button', { name: 'Send the verification link again' }).click();
    await page.getByText(`A new verification link is on its way to ${firstEmail}`).waitFor();
    await expect.poll(() => mailsTo(firstEmail, 'Verify your e-mail address for Service').length, { timeout: 15_000 }).toBe(2);
    const [first, second] = mailsTo(firstEmail, 'Verify your e-mail address for Service').map((m) => linkIn(m, '/verify-email'));

    // The first link was replaced: the page says so and offers no button to press again.
    await page.goto(first!);
    await page.getByRole('heading', { name: 'Verify your e-mail address' }).waitFor();
    await page.getByRole('button', { name: 'Verify my address' }).click();
    await page.getByRole('alert').filter({ hasText: 'This link no longer works' }).waitFor();
    await expect(page.getByRole('button', { name: 'Verify my address' }).count()).resolves.toBe(0);

    await page.goto(second!);
    await page.getByRole('button', { name: 'Verify my address' }).click();
    await page.getByText(`${firstEmail} is verified.`).waitFor();
    expect(new URL(page.url()).hash).toBe('');
    await page.getByRole('link', { name: 'Go to Settings' }).click();
    await page.getByTestId('email-state').filter({ hasText: 'Verified' }).waitFor();
    await expect(page.getByTestId('email-state').textContent()).resolves.not.toContain('Not verified');
    await expect(page.getByText('Verify your e-mail address: open the link we sent to').count()).resolves.toBe(0);
  });

  it('changes the address only once the new mailbox confirms, and tells the old one', async () => {
    await page.getByLabel('New e-mail address').fill(secondEmail);
    await page.getByLabel('Password for the change').fill('not my password');
    await page.getByRole('button', { name: 'Change e-mail address' }).click();
    await page.getByRole('alert').filter({ hasText: 'The password is wrong' }).waitFor();
    await page.getByLabel('Password for the change').fill(password);
    await page.getByRole('button', { name: 'Change e-mail address' }).click();
    await page.getByText(`Open the link we sent to ${secondEmail} to finish the change.`).waitFor();
    await page.getByText('Waiting for confirmation').waitFor();
    await expect(page.getByTestId('signed-in-email').textContent()).resolves.toBe(firstEmail);

    const message = await mail.waitFor((m) => recipientOf(m).includes(secondEmail) && m.subject === 'Confirm your new e-mail address for Service');
    // Opened from the new mailbox on another device, signed out.
    const { context, page: phone } = await browser.newPerson();
    try {
      await phone.goto(linkIn(message, '/confirm-email'));
      await phone.getByRole('heading', { name: 'Confirm your new e-mail address' }).waitFor();
      await phone.getByRole('button', { name: 'Use this address' }).click();
      await phone.getByText(`You now sign in as ${secondEmail}. We told ${firstEmail} about the change.`).waitFor();
      await phone.getByRole('link', { name: 'Sign in' }).first().waitFor();
    } finally {
      await context.close();
    }
    const notice = await mail.waitFor((m) => recipientOf(m).includes(firstEmail) && m.subject === 'Your Service sign-in address was changed');
    expect(notice.text).toContain(secondEmail);

    await page.reload();
    await page.getByTestId('email-state').filter({ hasText: secondEmail }).waitFor();
    await expect(page.getByTestId('signed-in-email').textContent()).resolves.toBe(secondEmail);
    await expect(page.getByText('Waiting for confirmation').count()).resolves.toBe(0);
  });

  it('one login, two accounts: accepts another owner’s invitation and switches in the header', async () => {
    // Another owner, verified, invites this person's (new) address.
    const otherEmail = `${uniqueId('other-owner')}@example.test`;
    const other = expectOk<{ fullKey: string }>(
      await app.inject({ method: 'POST', url: '/api/v1/register', payload: { email: otherEmail, password } }),
      201,
    );
    const verifyMail = await mail.waitFor((m) => recipientOf(m).includes(otherEmail) && m.subject === 'Verify your e-mail address for Service');
    const token = linkIn(verifyMail, '/verify-email').split('#token=')[1]!;
    expectOk(await app.inject({ method: 'POST', url: '/api/auth/verify-email', payload: { token } }));
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/members', headers: bearer(other.fullKey), payload: { email: secondEmail } }), 201);
    const invitation = await mail.waitFor((m) => recipientOf(m).includes(secondEmail) && m.subject === 'You are invited to approve steps on Service');

    await page.goto(inviteLinkIn(invitation).link);
    await page.getByRole('heading', { name: 'Accept your invitation' }).waitFor();
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Accept and sign in' }).click();
    await page.getByRole('heading', { name: 'Inbox', exact: true }).waitFor();
    await expect(page.getByText(`Approver for ${otherEmail}`).first().isVisible()).resolves.toBe(true);

    const switcher = page.getByLabel('Account', { exact: true });
    await expect(switcher.locator('option').allTextContents()).resolves.toEqual([`Your account (${secondEmail})`, `Approver for ${otherEmail}`]);
    await switcher.selectOption({ label: `Your account (${secondEmail})` });
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await expect(page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Keys' }).count()).resolves.toBe(1);
    await switcher.selectOption({ label: `Approver for ${otherEmail}` });
    await page.getByRole('heading', { name: 'Inbox', exact: true }).waitFor();
    await expect(page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Keys' }).count()).resolves.toBe(0);
    // The switch survives a reload: it is the session's account, not the page's.
    await page.reload();
    await page.getByRole('heading', { name: 'Inbox', exact: true }).waitFor();
    const approverCookies = (await page.context().cookies()).map((c) => `${c.name}=${c.value}`).join('; ');
    await page.getByLabel('Account', { exact: true }).selectOption({ label: `Your account (${secondEmail})` });
    await page.getByRole('heading', { name: 'Overview' }).waitFor();

    // A call still carrying the session the switch ended (sent just before it) answers a real 401:
    // here the page's call is made with the old cookie (from the test: a browser's route cannot
    // change a request's cookie). That alone does not sign out: the session is asked first, and it
    // still answers.
    await page.route(
      (url) => url.pathname === '/api/v1/keys',
      async (route) => {
        const stale = await fetch(route.request().url(), { headers: { cookie: approverCookies } });
        await route.fulfill({ status: stale.status, contentType: 'application/json', body: await stale.text() });
      },
      { times: 1 },
    );
    const staleAnswer = page.waitForResponse((response) => new URL(response.url()).pathname === '/api/v1/keys');
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Keys' }).click();
    expect((await staleAnswer).status()).toBe(401);
    // The page's call is made again once the session has answered (a check of its own, or one already under
    // way): the keys show, not "Your session has ended", and the person is still signed in.
    await page.getByRole('list', { name: 'API keys' }).waitFor();
    await expect(page.getByText('Your session has ended').count()).resolves.toBe(0);
    await expect(page.getByRole('link', { name: /^Settings, signed in as / }).count()).resolves.toBe(1);
    await expect(page.getByRole('heading', { name: 'Sign in' }).count()).resolves.toBe(0);

    // Made once more only: when the call made again answers 401 too, the page says so and does not call a third time.
    let keyCalls = 0;
    await page.route(
      (url) => url.pathname === '/api/v1/keys',
      async (route) => {
        keyCalls += 1;
        const stale = await fetch(route.request().url(), { headers: { cookie: approverCookies } });
        await route.fulfill({ status: stale.status, contentType: 'application/json', body: await stale.text() });
      },
      { times: 2 },
    );
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Overview' }).click();
    await page.getByRole('heading', { name: 'Overview' }).waitFor();
    await page.getByRole('navigation', { name: 'Main' }).getByRole('link', { name: 'Keys' }).click();
    await page.getByRole('heading', { level: 1, name: 'Keys' }).waitFor();
    await page.getByText('Your session has ended').first().waitFor();
    await page.waitForTimeout(500);
    expect(keyCalls).toBe(2);
    await expect(page.getByRole('link', { name: /^Settings, signed in as / }).count()).resolves.toBe(1);
  });

  it('deletes the account with the password, giving up the balance left', async () => {
    await openSettings();
    const card = page.locator('.danger-zone');
    await card.getByText(/^I give up the \$\d+\.\d{2} left on the balance\. It is not paid back\.$/).waitFor();
    await card.getByLabel('Password to delete the account').fill('not my password');
    await card.getByRole('checkbox').check();
    await card.getByRole('button', { name: 'Delete the account' }).click();
    await card.getByText('This cannot be undone. Delete the account now?').waitFor();
    await card.getByRole('button', { name: 'Yes, delete the account' }).click();
    await card.getByRole('alert').filter({ hasText: 'The password is wrong' }).waitFor();

    await card.getByLabel('Password to delete the account').fill(password);
    await card.getByRole('button', { name: 'Yes, delete the account' }).click();
    await page.getByRole('heading', { name: 'Your account is deleted' }).waitFor();
    const goodbye = await mail.waitFor((m) => recipientOf(m).includes(secondEmail) && m.subject === 'Your Service account was deleted');
    expect(goodbye.text).toContain('was given up, as you confirmed');

    // Signed out, and the login is gone.
    await page.goto(`${base}/signin`);
    await page.getByLabel('Email', { exact: true }).fill(secondEmail);
    await page.getByLabel('Password', { exact: true }).fill(password);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('The email or password is wrong');
  });

  it('throws no script errors on the new pages', async () => {
    await expectNoScriptErrors(browser, async (fresh) => {
      for (const [path, heading] of [
        ['/verify-email', 'Verify your e-mail address'],
        ['/confirm-email', 'Confirm your new e-mail address'],
        ['/account-deleted', 'Your account is deleted'],
      ] as const) {
        await fresh.goto(`${base}${path}`);
        await fresh.getByRole('heading', { level: 1, name: heading, exact: true }).waitFor();
      }
    });
  });
});
