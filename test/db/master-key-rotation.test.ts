import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runApiCli } from '#cli/api-cli';
import { rotateMasterKey, RotationError } from '#cli/master-key';
import { connectionContext, openSecret, platformKeyContext, sealSecret } from '#core/platform';
import { upsertConnection } from '#db/connections';
import { insertWebhookEndpoint } from '#db/webhooks';
import { sealWebhookSecret, webhookSecretContext } from '#core/notifications';
import { createTestAccount } from '#fixtures/accounts';
import {
  OAuthClients,
  oauthAccessTokenContext,
  oauthClientSecretContext,
  oauthProviderSecretContext,
  oauthRefreshTokenContext,
  oauthVerifierContext,
  registerOAuthApp,
  sealTokens,
} from '#core/oauth';
import { insertOAuthAuthorization, insertOAuthConnection } from '#db/oauth';
import { providerSecret } from '#db/oauth-provider';
import { randomUUID } from 'node:crypto';
import { createSql, type Sql } from '#db/sql';
import { testDatabaseUrl, testEdgeSettings, uniqueId } from '../helpers/settings.js';

describe('rotating CONNECTIONS_MASTER_KEY', () => {
  let sql: Sql;
  const devKey = testEdgeSettings().CONNECTIONS_MASTER_KEY;
  beforeAll(() => {
    sql = createSql(testDatabaseUrl(), { max: 2 });
  });
  afterAll(async () => sql.end());

  const sealedConnection = async (accountId: string, apiId: string) =>
    (await sql<{ key_encrypted: Buffer }[]>`select key_encrypted from connections where account_id = ${accountId} and api_id = ${apiId}`)[0]!
      .key_encrypted;
  const sealedPlatformKey = async (apiId: string) =>
    (await sql<{ platform_key_encrypted: Buffer }[]>`select platform_key_encrypted from apis where id = ${apiId}`)[0]!.platform_key_encrypted;

  it('re-seals every connection and platform key in one go, refuses a wrong old key without changing anything, and the CLI prints no secret', async () => {
    const apiId = uniqueId('rot-');
    await runApiCli(
      [
        'add',
        '--id',
        apiId,
        '--name',
        'Rotating',
        '--base-url',
        'https://rot.example.com',
        '--price',
        '0.001',
        '--platform-key',
        'platform-SECRET-1',
      ],
      {
        ...process.env,
        DATABASE_URL: testDatabaseUrl(),
      },
    );
    const account = await createTestAccount(sql);
    await upsertConnection(sql, {
      accountId: account.accountId,
      apiId,
      sealed: sealSecret(devKey, 'byok-SECRET-2', connectionContext(account.accountId, apiId)),
      keyHint: '…T-2',
    });

    const webhookId = uniqueId('whe_rot');
    await insertWebhookEndpoint(sql, {
      id: webhookId,
      accountId: account.accountId,
      url: 'https://hooks.example.com/x',
      description: '',
      eventTypes: ['key.revoked'],
      secretSealed: sealWebhookSecret(devKey, webhookId, 'whsec_SECRET-3'),
    });
    const sealedWebhook = async () =>
      (await sql<{ secret_sealed: Buffer }[]>`select secret_sealed from webhook_endpoints where id = ${webhookId}`)[0]!.secret_sealed;

    // OAuth: an account's own app (client secret), a connection (access and refresh tokens) and a consent flow under way (PKCE verifier).
    const clients = new OAuthClients({ CONNECTIONS_MASTER_KEY: devKey, ALLOW_PRIVATE_UPSTREAMS: false });
    const provider = `${uniqueId('rot')}.example.com`;
    const app = await registerOAuthApp(
      sql,
      clients,
      devKey,
      { accountId: account.accountId },
      {
        provider,
        clientId: 'rotating-client',
        clientSecret: 'client-SECRET-4',
        authorizationUrl: `https://${provider}/authorize`,
        tokenUrl: `https://${provider}/token`,
      },
    );
    await clients.close();
    const grantId = randomUUID();
    await insertOAuthConnection(sql, {
      id: grantId,
      accountId: account.accountId,
      provider,
      label: 'rotating',
      appId: app.id,
      grantType: 'authorization_code',
      scopes: ['read'],
      ...sealTokens(devKey, grantId, { accessToken: 'access-SECRET-5', refreshToken: 'refresh-SECRET-6' }),
      expiresAt: null,
      createdByPersonId: null,
    });
    const stateHash = uniqueId('state');
    await insertOAuthAuthorization(sql, {
      stateHash,
      accountId: account.accountId,
      sessionHash: 'x',
      personId: null,
      provider,
      apiId: null,
      appId: app.id,
      label: 'rotating-2',
      connectionId: null,
      scopes: ['read'],
      codeVerifierSealed: sealSecret(devKey, 'verifier-SECRET-7', oauthVerifierContext(stateHash)),
      connectRequestId: null,
      returnTo: null,
      expiresAt: new Date(Date.now() + 60_000),
    });
    // The MCP authorization server's signing keys, as the edge seals them on first start.
    const serverSecret = uniqueId('jwks');
    await providerSecret(sql, serverSecret, () => sealSecret(devKey, '{"keys":["signing-SECRET-8"]}', oauthProviderSecretContext(serverSecret)));
    const oauthRows = async () => {
      const [appRow] = await sql<{ client_secret_encrypted: Buffer }[]>`select client_secret_encrypted from oauth_apps where id = ${app.id}`;
      const [grant] = await sql<{ access_token_encrypted: Buffer; refresh_token_encrypted: Buffer }[]>`
        select access_token_encrypted, refresh_token_encrypted from oauth_connections where id = ${grantId}`;
      const [flow] = await sql<
        { code_verifier_encrypted: Buffer }[]
      >`select code_verifier_encrypted from oauth_authorizations where state_hash = ${stateHash}`;
      return {
        secret: appRow!.client_secret_encrypted,
        access: grant!.access_token_encrypted,
        refresh: grant!.refresh_token_encrypted,
        verifier: flow!.code_verifier_encrypted,
      };
    };

    const newKey = randomBytes(32);
    const before = await sealedConnection(account.accountId, apiId);
    await expect(rotateMasterKey(sql, randomBytes(32), newKey)).rejects.toThrow(RotationError);
    expect((await sealedConnection(account.accountId, apiId)).equals(before)).toBe(true);

    const report = await rotateMasterKey(sql, devKey, newKey);
    expect(report.connections).toBeGreaterThanOrEqual(1);
    expect(report.platformKeys).toBeGreaterThanOrEqual(1);
    expect(openSecret(newKey, await sealedConnection(account.accountId, apiId), connectionContext(account.accountId, apiId))).toBe('byok-SECRET-2');
    expect(openSecret(newKey, await sealedPlatformKey(apiId), platformKeyContext(apiId))).toBe('platform-SECRET-1');
    expect(report.webhookSecrets).toBeGreaterThanOrEqual(1);
    expect(openSecret(newKey, await sealedWebhook(), webhookSecretContext(webhookId))).toBe('whsec_SECRET-3');
    expect(report.oauthApps).toBeGreaterThanOrEqual(1);
    expect(report.oauthConnections).toBeGreaterThanOrEqual(1);
    expect(report.oauthAuthorizations).toBeGreaterThanOrEqual(1);
    const rotated = await oauthRows();
    expect(openSecret(newKey, rotated.secret, oauthClientSecretContext(account.accountId, provider))).toBe('client-SECRET-4');
    expect(openSecret(newKey, rotated.access, oauthAccessTokenContext(grantId))).toBe('access-SECRET-5');
    expect(openSecret(newKey, rotated.refresh, oauthRefreshTokenContext(grantId))).toBe('refresh-SECRET-6');
    expect(openSecret(newKey, rotated.verifier, oauthVerifierContext(stateHash))).toBe('verifier-SECRET-7');
    expect(report.authorizationServerSecrets).toBeGreaterThanOrEqual(1);
    const [jwks] = await sql<{ sealed: Buffer }[]>`select sealed from oauth_provider_secrets where name = ${serverSecret}`;
    expect(openSecret(newKey, jwks!.sealed, oauthProviderSecretContext(serverSecret))).toContain('signing-SECRET-8');
    expect(() => openSecret(devKey, rotated.access, oauthAccessTokenContext(grantId))).toThrow();
    const after = await sealedConnection(account.accountId, apiId);
    expect(() => openSecret(devKey, after, connectionContext(account.accountId, apiId))).toThrow();
    // A second run with the same old key finds rows it cannot open: nothing changes.
    await expect(rotateMasterKey(sql, devKey, randomBytes(32))).rejects.toThrow(/does not open under the old key/);

    // The operator's command rotates back to the development key, printing counts only.
    const run = await new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(process.execPath, ['--import', 'tsx', 'apps/cli/rotate-master-key.ts'], {
        env: {
          ...process.env,
          DATABASE_URL: testDatabaseUrl(),
          CONNECTIONS_MASTER_KEY: newKey.toString('hex'),
          NEW_CONNECTIONS_MASTER_KEY: devKey.toString('base64'),
        },
      });
      let out = '';
      child.stdout.on('data', (chunk) => (out += chunk));
      child.stderr.on('data', (chunk) => (out += chunk));
      child.on('close', (code) => resolve({ code, out }));
    });
    expect(run.code, run.out).toBe(0);
    expect(run.out).toMatch(
      /re-sealed \d+ connection keys, \d+ platform keys, \d+ webhook secrets, \d+ OAuth client secrets, the tokens of \d+ OAuth connections/,
    );
    expect(run.out).not.toContain('SECRET');
    expect(run.out).not.toContain(newKey.toString('hex'));
    expect(openSecret(devKey, await sealedConnection(account.accountId, apiId), connectionContext(account.accountId, apiId))).toBe('byok-SECRET-2');
    expect(openSecret(devKey, (await oauthRows()).refresh, oauthRefreshTokenContext(grantId))).toBe('refresh-SECRET-6');
  });
});
