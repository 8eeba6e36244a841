import * as oidc from 'openid-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliError, runApiCli } from '#cli/api-cli';
import { OAuthClients, oauthClientSecretContext, registerOAuthApp } from '#core/oauth';
import { openSecret } from '#core/platform';
import { findOAuthAppFor, listOAuthApps } from '#db/oauth';
import { createTestAccount } from '#fixtures/accounts';
import { createSql, type Sql } from '#db/sql';
import { startTestOAuthProvider, type TestOAuthProvider } from '../helpers/oidc-provider.js';
import { testDatabaseUrl, testEdgeSettings, uniqueId } from '../helpers/settings.js';

const masterKey = testEdgeSettings().CONNECTIONS_MASTER_KEY;
const env = (extra: Record<string, string> = {}) => ({ ...process.env, DATABASE_URL: testDatabaseUrl(), ...extra });

describe('OAuth apps: the operator CLI and the client side', () => {
  let sql: Sql;
  let provider: TestOAuthProvider;
  beforeAll(async () => {
    sql = createSql(testDatabaseUrl(), { max: 2 });
    provider = await startTestOAuthProvider({ redirectUris: ['http://127.0.0.1:3000/api/v1/oauth/callback'] });
  });
  afterAll(async () => {
    await provider.close();
    await sql.end();
  });

  it('registers an operator app with the secret from stdin, sealed; lists it without the secret; replaces and removes it', async () => {
    const host = `${uniqueId('prov')}.example.com`;
    const secret = `cli-SECRET-${uniqueId('s')}`;
    const out = await runApiCli(
      [
        'oauth-app',
        'set',
        '--provider',
        host.toUpperCase(),
        '--client-id',
        'operator-client',
        '--client-secret-stdin',
        '--authorization-url',
        `https://${host}/authorize`,
        '--token-url',
        `https://${host}/token`,
        '--revocation-url',
        `https://${host}/revoke`,
        '--scope',
        'offline_access',
        '--param',
        'access_type=offline',
      ],
      env(),
      { readStdin: async () => `${secret}\n` },
    );
    expect(out).toContain(host);
    expect(out).toContain('/api/v1/oauth/callback');
    expect(out).not.toContain(secret);
    const [app] = (await listOAuthApps(sql, { accountId: null })).filter((a) => a.provider === host);
    expect(app).toMatchObject({ clientId: 'operator-client', defaultScopes: ['offline_access'], authorizationParams: { access_type: 'offline' } });
    expect(app!.clientSecretSealed!.includes(Buffer.from(secret))).toBe(false);
    expect(openSecret(masterKey, app!.clientSecretSealed!, oauthClientSecretContext(null, host))).toBe(secret);

    const listed = await runApiCli(['oauth-app', 'list'], env());
    expect(listed).toContain(host);
    expect(listed).not.toContain(secret);

    // Setting it again replaces it in place (the same row, so connections made with it stay valid).
    await runApiCli(
      [
        'oauth-app',
        'set',
        '--provider',
        host,
        '--client-id',
        'operator-client-2',
        '--client-secret-file',
        '/secret',
        '--authorization-url',
        `https://${host}/a`,
        '--token-url',
        `https://${host}/t`,
      ],
      env(),
      { readFile: async () => 'second-secret' },
    );
    const [replaced] = (await listOAuthApps(sql, { accountId: null })).filter((a) => a.provider === host);
    expect(replaced!.id).toBe(app!.id);
    expect(replaced!.clientId).toBe('operator-client-2');
    expect(replaced!.revocationUrl).toBeNull();

    // An account's own app for the same provider wins over the operator's for that account only.
    const account = await createTestAccount(sql);
    const clients = new OAuthClients({ CONNECTIONS_MASTER_KEY: masterKey, ALLOW_PRIVATE_UPSTREAMS: false });
    await registerOAuthApp(
      sql,
      clients,
      masterKey,
      { accountId: account.accountId },
      {
        provider: host,
        clientId: 'own-client',
        clientSecret: 'own-secret',
        authorizationUrl: `https://${host}/authorize`,
        tokenUrl: `https://${host}/token`,
      },
    );
    await clients.close();
    expect((await findOAuthAppFor(sql, account.accountId, host))!.clientId).toBe('own-client');
    const other = await createTestAccount(sql);
    expect((await findOAuthAppFor(sql, other.accountId, host))!.clientId).toBe('operator-client-2');

    expect(await runApiCli(['oauth-app', 'remove', '--provider', host], env())).toContain(`removed the OAuth app for ${host}`);
    await expect(runApiCli(['oauth-app', 'remove', '--provider', host], env())).rejects.toThrow(/no operator OAuth app/);
  });

  it('refuses bad registrations with a message naming the problem', async () => {
    const base = ['oauth-app', 'set', '--provider', 'auth.example.com', '--client-id', 'c'];
    const urls = ['--authorization-url', 'https://auth.example.com/a', '--token-url', 'https://auth.example.com/t'];
    const stdin = { readStdin: async () => 's' };
    await expect(runApiCli([...base, ...urls], env(), stdin)).rejects.toThrow(/exactly one of --client-secret-stdin/);
    await expect(runApiCli([...base, '--public', '--client-secret-stdin', ...urls], env(), stdin)).rejects.toThrow(/exactly one/);
    await expect(runApiCli([...base, '--client-secret-stdin', ...urls], env(), { readStdin: async () => '\n' })).rejects.toThrow(/empty/);
    await expect(
      runApiCli(
        [...base, '--client-secret-stdin', '--authorization-url', 'http://auth.example.com/a', '--token-url', 'https://auth.example.com/t'],
        env(),
        stdin,
      ),
    ).rejects.toThrow(/authorizationUrl must use https/);
    await expect(
      runApiCli(['oauth-app', 'set', '--provider', 'not a host', '--client-id', 'c', '--client-secret-stdin', ...urls], env(), stdin),
    ).rejects.toThrow(/provider must be the authorization server's host/);
    await expect(runApiCli([...base, '--client-secret-stdin', ...urls, '--param', 'state=x'], env(), stdin)).rejects.toThrow(/set by the platform/);
    await expect(runApiCli([...base, '--client-secret-stdin', ...urls, '--scope', 'bad"scope'], env(), stdin)).rejects.toThrow(
      /not a valid OAuth scope/,
    );
    await expect(runApiCli([...base, '--client-secret-stdin', '--token-url', 'https://auth.example.com/t'], env(), stdin)).rejects.toThrow(
      /authorizationUrl and tokenUrl/,
    );
    await expect(runApiCli(['oauth-app', 'frobnicate'], env())).rejects.toBeInstanceOf(CliError);
  });

  it('discovers the endpoints from an issuer, and its configuration gets tokens from the real provider', async () => {
    // The loopback provider is plain http: only with ALLOW_PRIVATE_UPSTREAMS (tests) may the platform talk to it.
    await expect(
      runApiCli(
        ['oauth-app', 'set', '--provider', provider.host, '--client-id', provider.clientId, '--client-secret-stdin', '--issuer', provider.issuer],
        env(),
        {
          readStdin: async () => provider.clientSecret,
        },
      ),
    ).rejects.toThrow(/not https/);
    const out = await runApiCli(
      ['oauth-app', 'set', '--provider', provider.host, '--client-id', provider.clientId, '--client-secret-stdin', '--issuer', provider.issuer],
      env({ ALLOW_PRIVATE_UPSTREAMS: 'true' }),
      { readStdin: async () => provider.clientSecret },
    );
    expect(out).not.toContain(provider.clientSecret);
    const [app] = (await listOAuthApps(sql, { accountId: null })).filter((a) => a.provider === provider.host);
    expect(app).toMatchObject({
      issuer: provider.issuer,
      authorizationUrl: provider.authorizationUrl,
      tokenUrl: provider.tokenUrl,
      revocationUrl: provider.revocationUrl,
      tokenAuthMethod: 'client_secret_basic',
    });

    const clients = new OAuthClients({ CONNECTIONS_MASTER_KEY: masterKey, ALLOW_PRIVATE_UPSTREAMS: true });
    try {
      const tokens = await oidc.clientCredentialsGrant(clients.configuration(app!), { scope: 'read' });
      expect((await provider.inspect(tokens.access_token))?.kind).toBe('ClientCredentials');
      await oidc.tokenRevocation(clients.configuration(app!), tokens.access_token);
      expect(await provider.inspect(tokens.access_token)).toBeUndefined();
    } finally {
      await clients.close();
    }
    // Without the setting the same app is refused before any request (plain http), and loopback would be refused anyway.
    const strict = new OAuthClients({ CONNECTIONS_MASTER_KEY: masterKey, ALLOW_PRIVATE_UPSTREAMS: false });
    expect(() => strict.configuration(app!)).toThrow(/plain http/);
    await strict.close();
    await runApiCli(['oauth-app', 'remove', '--provider', provider.host], env());
  });
});
