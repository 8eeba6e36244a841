import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CliError, parseAuth, runApiCli } from '#cli/api-cli';
import { priceOf } from '#core/gateway';
import { getMeteredApi } from '#db/metered-apis';
import { openSecret, platformKeyContext } from '#core/platform';
import { createSql, type Sql } from '#db/sql';
import { testDatabaseUrl, testEdgeSettings, uniqueId } from '../helpers/settings.js';

const env = () => ({ ...process.env, DATABASE_URL: testDatabaseUrl() });
const run = (argv: string[]) => runApiCli(argv, env());

describe('operator CLI: npm run api', () => {
  let sql: Sql;
  beforeAll(() => {
    sql = createSql(testDatabaseUrl(), { max: 2 });
  });
  afterAll(async () => sql.end());

  it('adds an API with price, auth, BYOK price, rules and a sealed platform key', async () => {
    const id = uniqueId('cli-');
    const out = await run([
      'add',
      '--id',
      id,
      '--name',
      'Weather',
      '--base-url',
      'https://api.example.com/v2/',
      '--price',
      '0.002',
      '--auth',
      'header:X-Api-Key',
      '--platform-key',
      'plat-KEY-0001',
      '--byok-price',
      '0.0005',
      '--rule',
      'POST /forecast*=0.01',
      '--category',
      'weather',
    ]);
    expect(out).toContain(id);
    expect(out).not.toContain('plat-KEY-0001');
    const api = (await getMeteredApi(sql, id))!;
    expect(api).toMatchObject({
      baseUrl: 'https://api.example.com/v2',
      authScheme: { type: 'apiKey', in: 'header', name: 'X-Api-Key' },
      priceMicros: 2_000n,
      byokPriceMicros: 500n,
      source: 'operator',
    });
    expect(openSecret(testEdgeSettings().CONNECTIONS_MASTER_KEY, api.platformKeyEncrypted!, platformKeyContext(id))).toBe('plat-KEY-0001');
    expect(priceOf(api, 'POST', '/forecast/daily', false)).toBe(10_000n);
    expect(priceOf(api, 'GET', '/forecast/daily', false)).toBe(2_000n);
    expect(priceOf(api, 'GET', '/forecast/daily', true)).toBe(500n);
    await expect(run(['add', '--id', id, '--name', 'x', '--base-url', 'https://x.example', '--price', '1'])).rejects.toThrow(/already exists/);
  });

  it('updates, sets and clears keys, shows and lists without printing keys', async () => {
    const id = uniqueId('cli-');
    await run(['add', '--id', id, '--name', 'Maps', '--base-url', 'https://maps.example.com', '--price', '0.001']);
    await run(['update', '--id', id, '--price', '0.003', '--auth', 'query:key', '--byok-price', '0.001', '--name', 'Maps v2']);
    let api = (await getMeteredApi(sql, id))!;
    expect(api).toMatchObject({
      name: 'Maps v2',
      priceMicros: 3_000n,
      byokPriceMicros: 1_000n,
      authScheme: { type: 'apiKey', in: 'query', name: 'key' },
      baseUrl: 'https://maps.example.com',
    });
    await run(['update', '--id', id, '--byok-price', 'none']);
    expect((await getMeteredApi(sql, id))!.byokPriceMicros).toBeNull();
    expect(await run(['set-key', '--id', id, '--key', 'secret-maps-key'])).toContain('set the platform key');
    const shown = await run(['show', '--id', id]);
    expect(JSON.parse(shown)).toMatchObject({ id, price: '0.003', platformKey: 'set', auth: { type: 'apiKey', in: 'query', name: 'key' } });
    expect(shown).not.toContain('secret-maps-key');
    expect(await run(['list'])).toContain(id);
    await run(['set-key', '--id', id, '--clear']);
    api = (await getMeteredApi(sql, id))!;
    expect(api.platformKeyEncrypted).toBeNull();
  });

  it('removes an operator API, with its connections, and refuses to remove an imported one', async () => {
    const id = uniqueId('cli-');
    await run(['add', '--id', id, '--name', 'Leftover', '--base-url', 'https://leftover.example.com', '--price', '0.001']);
    const [account] = await sql<{ id: string }[]>`
      insert into accounts (email) values (${`${id}@example.test`}) returning id`;
    await sql`insert into connections (account_id, api_id, key_encrypted, key_hint) values (${account!.id}, ${id}, ${Buffer.from('sealed')}, 'abcd')`;
    await sql`insert into votes (account_id, target_type, target_id, value) values (${account!.id}, 'api', ${id}, 1)`;
    expect(await run(['remove', '--id', id])).toMatch(new RegExp(`^removed ${id}`));
    expect(await getMeteredApi(sql, id)).toBeNull();
    expect(await sql`select 1 from connections where api_id = ${id}`).toHaveLength(0);
    // Votes name an API by id: a later API under the same id starts with none.
    expect(await sql`select 1 from votes where target_type = 'api' and target_id = ${id}`).toHaveLength(0);
    await expect(run(['remove', '--id', id])).rejects.toThrow(`API ${id} does not exist`);
    // An API of the imported catalog (every test database holds it).
    await expect(run(['remove', '--id', 'stripe.com'])).rejects.toThrow(/imported from the catalog/);
    expect(await getMeteredApi(sql, 'stripe.com')).not.toBeNull();
  });

  it('refuses bad input with a clear message', async () => {
    const bad: string[][] = [
      ['add', '--id', 'Bad Id', '--name', 'x', '--base-url', 'https://x.example', '--price', '1'],
      ['add', '--id', uniqueId('cli-'), '--name', 'x', '--base-url', 'ftp://x.example', '--price', '1'],
      ['add', '--id', uniqueId('cli-'), '--name', 'x', '--base-url', 'not a url', '--price', '1'],
      ['add', '--id', uniqueId('cli-'), '--name', 'x', '--base-url', 'https://x.example', '--price', '-1'],
      ['add', '--id', uniqueId('cli-'), '--name', 'x', '--base-url', 'https://x.example', '--price', '0.0000001'],
      ['add', '--id', uniqueId('cli-'), '--name', 'x', '--base-url', 'https://x.example', '--price', '1', '--auth', 'cookie'],
      ['add', '--id', uniqueId('cli-'), '--name', 'x', '--base-url', 'https://x.example', '--price', '1', '--rule', 'nonsense'],
      ['add', '--id', uniqueId('cli-'), '--base-url', 'https://x.example', '--price', '1'],
      ['update', '--id', uniqueId('cli-'), '--price', '1'],
      ['set-key', '--id', uniqueId('cli-'), '--key', 'k'],
      ['show', '--id', uniqueId('cli-')],
      ['frobnicate'],
      ['add', '--unknown-flag'],
    ];
    for (const argv of bad) await expect(run(argv), argv.join(' ')).rejects.toBeInstanceOf(CliError);
    expect(() => parseAuth('header:')).toThrow(CliError);
    expect(parseAuth('bearer')).toEqual({ type: 'bearer' });
  });

  it('describes an OAuth 2 API served by a provider on loopback: flows, scopes, provider key and key docs', async () => {
    const id = uniqueId('cli-');
    const issuer = 'http://127.0.0.1:45123';
    const out = await run([
      'add',
      '--id',
      id,
      '--name',
      'Loopback OAuth API',
      '--base-url',
      'http://127.0.0.1:45124/api',
      '--price',
      '0.001',
      '--oauth-authorization-url',
      `${issuer}/auth`,
      '--oauth-token-url',
      `${issuer}/token`,
      '--oauth-client-credentials',
      '--oauth-scopes',
      'openid, api:read,api:write',
      '--key-docs-url',
      'https://provider.example.org/developers',
    ]);
    expect(JSON.parse(out.replace(/^added /, ''))).toMatchObject({
      id,
      auth: { type: 'oauth2' },
      oauth: { provider: '127.0.0.1:45123', scopes: ['openid', 'api:read', 'api:write'] },
      keyDocsUrl: 'https://provider.example.org/developers',
    });
    const api = (await getMeteredApi(sql, id))!;
    expect(api).toMatchObject({
      authScheme: { type: 'oauth2' },
      oauthProvider: '127.0.0.1:45123',
      keyDocsUrl: 'https://provider.example.org/developers',
      oauth: {
        flows: {
          authorizationCode: { authorizationUrl: `${issuer}/auth`, tokenUrl: `${issuer}/token` },
          clientCredentials: { tokenUrl: `${issuer}/token` },
        },
        scopes: { openid: '', 'api:read': '', 'api:write': '' },
      },
    });
    const [row] = await sql<{ oauth_provider: string }[]>`select oauth_provider from apis where id = ${id}`;
    expect(row?.oauth_provider).toBe('127.0.0.1:45123');

    // A token URL alone is the client credentials flow.
    const machine = uniqueId('cli-');
    await run([
      'add',
      '--id',
      machine,
      '--name',
      'M2M',
      '--base-url',
      'https://m2m.example.com',
      '--price',
      '0.001',
      '--oauth-token-url',
      'https://login.m2m.example.com/token',
    ]);
    expect((await getMeteredApi(sql, machine))!).toMatchObject({
      oauth: { flows: { clientCredentials: { tokenUrl: 'https://login.m2m.example.com/token' } }, scopes: {} },
      oauthProvider: 'login.m2m.example.com',
    });
    expect((await getMeteredApi(sql, machine))!.oauth!.flows.authorizationCode).toBeUndefined();
  });

  it('takes an OAuth description from a JSON file, replaces it on update and clears it', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'api-cli-'));
    try {
      const file = join(dir, 'oauth.json');
      const description = {
        flows: { implicit: { authorizationUrl: 'https://login.microsoftonline.com/common/oauth2/authorize' } },
        scopes: { user_impersonation: 'impersonate your user account' },
      };
      await writeFile(file, JSON.stringify(description));
      const id = uniqueId('cli-');
      await run(['add', '--id', id, '--name', 'Azure-like', '--base-url', 'https://management.azure.com', '--price', '0.001', '--oauth-file', file]);
      expect((await getMeteredApi(sql, id))!).toMatchObject({
        authScheme: { type: 'oauth2' },
        oauth: description,
        oauthProvider: 'login.microsoftonline.com',
      });

      // update: new flags replace the description; --oauth-provider names the provider key.
      await run([
        'update',
        '--id',
        id,
        '--oauth-authorization-url',
        'https://idp.example.net/authorize',
        '--oauth-token-url',
        'https://idp.example.net/token',
        '--oauth-provider',
        'Accounts.Example.net',
      ]);
      expect((await getMeteredApi(sql, id))!).toMatchObject({
        oauth: {
          flows: { authorizationCode: { authorizationUrl: 'https://idp.example.net/authorize', tokenUrl: 'https://idp.example.net/token' } },
          scopes: {},
        },
        oauthProvider: 'accounts.example.net',
      });
      // An update that names no OAuth option leaves the description alone.
      await run(['update', '--id', id, '--price', '0.002', '--key-docs-url', 'https://docs.example.net/keys']);
      expect((await getMeteredApi(sql, id))!).toMatchObject({
        oauthProvider: 'accounts.example.net',
        keyDocsUrl: 'https://docs.example.net/keys',
        priceMicros: 2_000n,
      });
      await run(['update', '--id', id, '--clear-oauth', '--auth', 'bearer', '--key-docs-url', 'none']);
      expect((await getMeteredApi(sql, id))!).toMatchObject({ oauth: null, oauthProvider: null, keyDocsUrl: null, authScheme: { type: 'bearer' } });

      // Bad OAuth input: each refused with a CliError that says why.
      const bad = join(dir, 'bad.json');
      await writeFile(bad, JSON.stringify({ flows: { password: { tokenUrl: 'https://x.example.com/token' } }, scopes: {} }));
      const notJson = join(dir, 'not.json');
      await writeFile(notJson, '{ flows');
      const plainHttp = join(dir, 'http.json');
      await writeFile(plainHttp, JSON.stringify({ flows: { clientCredentials: { tokenUrl: 'http://idp.example.com/token' } }, scopes: {} }));
      const add = ['add', '--id', uniqueId('cli-'), '--name', 'x', '--base-url', 'https://x.example', '--price', '1'];
      const cases: [string[], RegExp][] = [
        [[...add, '--oauth-token-url', 'http://idp.example.com/token'], /https/],
        [[...add, '--oauth-authorization-url', 'https://idp.example.com/auth'], /--oauth-token-url is required/],
        [[...add, '--oauth-token-url', 'https://idp.example.com/token', '--oauth-scopes', 'read,has space'], /not a scope name/],
        [[...add, '--oauth-token-url', 'not a url'], /absolute https URL/],
        [[...add, '--oauth-token-url', 'https://user:pw@idp.example.com/token'], /credentials/],
        [[...add, '--oauth-file', bad], /not an OAuth description/],
        [[...add, '--oauth-file', notJson], /cannot read JSON/],
        [[...add, '--oauth-file', plainHttp], /https/],
        [[...add, '--oauth-file', join(dir, 'missing.json')], /cannot read JSON/],
        [[...add, '--oauth-file', plainHttp, '--oauth-scopes', 'a'], /leave out --oauth-scopes/],
        [[...add, '--oauth-provider', 'idp.example.com'], /give its URLs/],
        [[...add, '--oauth-token-url', 'https://idp.example.com/token', '--oauth-provider', 'not a host'], /host name/],
        [[...add, '--oauth-token-url', 'https://idp.example.com/token', '--auth', 'header:X-Key'], /--auth oauth2/],
        [[...add, '--clear-oauth'], /for update/],
        [[...add, '--key-docs-url', 'http://docs.example.com'], /https/],
        [['update', '--id', id, '--clear-oauth', '--oauth-token-url', 'https://idp.example.com/token'], /leave out the --oauth-\* options/],
      ];
      for (const [argv, message] of cases) await expect(run(argv), argv.join(' ')).rejects.toThrow(message);
      for (const [argv] of cases) await expect(run(argv), argv.join(' ')).rejects.toBeInstanceOf(CliError);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('runs as a process through tsx', async () => {
    const id = uniqueId('cli-');
    const { code, stdout, stderr } = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(
        'npx',
        ['tsx', 'apps/cli/api.ts', 'add', '--id', id, '--name', 'Spawned', '--base-url', 'https://spawned.example', '--price', '0.004'],
        { env: env() },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      child.on('close', (exitCode) => resolve({ code: exitCode, stdout, stderr }));
    });
    expect(code, stderr).toBe(0);
    expect(stdout).toContain(id);
    expect((await getMeteredApi(sql, id))!.priceMicros).toBe(4_000n);
  });
});
