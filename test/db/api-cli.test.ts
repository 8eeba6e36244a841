import { spawn } from 'node:child_process';
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
