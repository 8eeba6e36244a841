import type { Worker } from 'bullmq';
import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Page } from 'playwright-core';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { buildApp } from '#edge/app';
import { createRedis } from '#core/platform';
import {
  expectNoScriptErrors,
  freePort,
  launchBrowser,
  screenshotOnFailure,
  signUpInBrowser,
  type RunningBrowser,
  BROWSER_TEST_TIMEOUT_MS,
} from '../helpers/browser.js';
import { recipientOf, startEmailWorker, startMailServer, type MailServer } from '../helpers/mail.js';
import { testEdgeSettings, uniqueId } from '../helpers/settings.js';

/**
 * Account self-service in a real browser (issue 33): a person who forgot their password asks for a
 * link on the sign-in page, opens it from the e-mail (real SMTP, the e-mail queue's processor), sets
 * a new password and is signed out everywhere; on the Settings page they change the password, see
 * their sessions, sign out everywhere, and choose their e-mail notifications. Steps run in order on
 * one page.
 */
describe('account self-service in a browser', { timeout: BROWSER_TEST_TIMEOUT_MS }, () => {
  const redisPrefix = uniqueId('acct');
  const email = `${uniqueId('person')}@example.test`;
  const firstPassword = 'correct horse battery staple';
  const resetPassword = 'a freshly chosen passphrase';
  const changedPassword = 'yet another long passphrase';
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
    app = await buildApp(testEdgeSettings({ PORT: String(port), PUBLIC_URL: base, REDIS_PREFIX: redisPrefix }));
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
    onTestFailed(() => screenshotOnFailure(page, `account-settings-${task.name}`));
  });

  async function signIn(target: Page, password: string) {
    await target.goto(`${base}/signin`);
    await target.getByLabel('Email', { exact: true }).fill(email);
    await target.getByLabel('Password', { exact: true }).fill(password);
    await target.getByRole('button', { name: 'Sign in' }).click();
    await target.getByRole('heading', { name: 'Overview' }).waitFor();
  }

  it('resets a forgotten password through the e-mail link and signs out every session', async () => {
    await signUpInBrowser(page, base, email, firstPassword);
    const { context, page: other } = await browser.newPerson();
    try {
      await other.goto(`${base}/signin`);
      await other.getByRole('link', { name: 'Forgot password?' }).click();
      await other.getByRole('heading', { name: 'Forgot your password?' }).waitFor();
      await other.getByLabel('Email', { exact: true }).fill(email);
      await other.getByRole('button', { name: 'Send the link' }).click();
      await other.getByRole('heading', { name: 'Check your e-mail' }).waitFor();

      const message = await mail.waitFor((m) => recipientOf(m).includes(email));
      const link = /https?:\/\/\S+\/reset-password#token=[A-Za-z0-9_-]+/.exec(message.text ?? '')?.[0];
      expect(link, message.text).toBeTruthy();
      await other.goto(link!);
      await other.getByRole('heading', { name: 'Choose a new password' }).waitFor();
      await other.getByLabel('New password', { exact: true }).fill('password123');
      await other.getByRole('button', { name: 'Set the new password' }).click();
      await expect(other.getByRole('alert').textContent()).resolves.toContain('Password is too common');
      await other.getByLabel('New password', { exact: true }).fill(resetPassword);
      await other.getByRole('button', { name: 'Set the new password' }).click();
      await other.getByRole('heading', { name: 'Your new password is set' }).waitFor();
      expect(new URL(other.url()).hash).toBe('');

      // The link works once (a fresh load: only the fragment differs from the page now shown).
      await other.goto(link!);
      await other.reload();
      await other.getByLabel('New password', { exact: true }).fill('one more long passphrase');
      await other.getByRole('button', { name: 'Set the new password' }).click();
      await expect(other.getByRole('alert').textContent()).resolves.toContain('This link no longer works');
      await other.getByRole('link', { name: 'Ask for a new link' }).waitFor();
    } finally {
      await context.close();
    }

    // The browser that was signed in is signed out.
    await page.reload();
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.getByLabel('Email', { exact: true }).fill(email);
    await page.getByLabel('Password', { exact: true }).fill(firstPassword);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect(page.getByRole('alert').textContent()).resolves.toContain('The email or password is wrong');
    await signIn(page, resetPassword);
  });

  it('Settings: changes the password, lists sessions, chooses e-mails, signs out everywhere', async () => {
    const { context, page: elsewhere } = await browser.newPerson();
    try {
      await signIn(elsewhere, resetPassword);
      await page.getByRole('link', { name: /^Settings, signed in as / }).click();
      await page.getByRole('heading', { level: 1, name: 'Settings' }).waitFor();
      // The top bar stays one row at 1280 px: the signed-in address (the Settings link) is level with the nav links.
      const navLink = (await page.getByRole('navigation', { name: 'Main' }).getByRole('link').first().boundingBox())!;
      const settingsBox = (await page.getByRole('link', { name: /^Settings, signed in as / }).boundingBox())!;
      const middle = settingsBox.y + settingsBox.height / 2;
      expect(middle).toBeGreaterThan(navLink.y);
      expect(middle).toBeLessThan(navLink.y + navLink.height);

      await expect.poll(() => page.getByTestId('session-row').count()).toBe(2);
      await expect(page.getByTestId('session-row').filter({ hasText: 'This browser' }).count()).resolves.toBe(1);
      await expect(page.getByTestId('session-row').first().textContent()).resolves.toContain('Chrome on Linux');

      await page.getByLabel('Current password').fill('not my password');
      await page.getByLabel('New password', { exact: true }).fill(changedPassword);
      await page.getByRole('button', { name: 'Change password' }).click();
      await expect(page.getByRole('alert').first().textContent()).resolves.toContain('current password is wrong');
      await page.getByLabel('Current password').fill(resetPassword);
      await page.getByRole('button', { name: 'Change password' }).click();
      await page.getByText('Your password is changed. 1 other session was signed out.').waitFor();
      await elsewhere.reload();
      await elsewhere.getByRole('heading', { name: 'Sign in' }).waitFor();

      await page.getByRole('checkbox', { name: 'A cookbook session failed' }).check();
      await page.getByRole('button', { name: 'Save e-mail choices' }).click();
      await page.getByText('Your e-mail choices are saved.').waitFor();
      await page.reload();
      await expect(page.getByRole('checkbox', { name: 'A cookbook session failed' }).isChecked()).resolves.toBe(true);

      await signIn(elsewhere, changedPassword);
      await page.getByRole('button', { name: 'Sign out everywhere' }).click();
      await page.getByRole('button', { name: 'Yes, sign out everywhere' }).click();
      await page.getByRole('heading', { name: 'Sign in' }).waitFor();
      await elsewhere.reload();
      await elsewhere.getByRole('heading', { name: 'Sign in' }).waitFor();
    } finally {
      await context.close();
    }
  });

  it('throws no script errors on the new pages', async () => {
    await expectNoScriptErrors(browser, async (fresh) => {
      for (const [path, heading] of [
        ['/forgot-password', 'Forgot your password?'],
        ['/reset-password', 'Choose a new password'],
      ] as const) {
        await fresh.goto(`${base}${path}`);
        await fresh.getByRole('heading', { level: 1, name: heading, exact: true }).waitFor();
      }
    });
  });
});
