import type { AddressInfo } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STATEMENT_CSV_COLUMNS } from '#core/billing';
import { describeAuthCases } from '../helpers/auth-cases.js';
import { bearer, createTestAccount, createTestApp, expectError, expectOk, type TestAccount } from '../helpers/app.js';
import { uniqueId } from '../helpers/settings.js';
import { rawRequest, registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

// The statement against the ledger: after a top-up, served calls, calls refunded for the upstream's
// 5xx, and calls charged from a credit hold and written when the hold was settled, the statement's
// entries over all time add up to the account's balance, and each entry's balance follows from the last.

interface Entry {
  id: string;
  at: string;
  kind: string;
  amount: number;
  amountMicros: string;
  balanceAfter: number;
  balanceAfterMicros: string;
  apiId: string | null;
  item: string | null;
  description: string | null;
  keyId: string | null;
  refundOf: string | null;
  holdId: string | null;
}
interface Statement {
  from: string | null;
  to: string | null;
  summary: {
    entries: number;
    credits: number;
    creditsMicros: string;
    debits: number;
    debitsMicros: string;
    net: number;
    netMicros: string;
    openingBalance: number | null;
    openingBalanceMicros: string | null;
    closingBalance: number | null;
    closingBalanceMicros: string | null;
  };
  entries: Entry[];
  nextCursor: string | null;
}

const SECRET = 'AKIAabcdef0123456789XYZ';

describe('GET /api/v1/statement', () => {
  let app: FastifyInstance;
  let edge: string;
  let upstream: TestUpstream;
  let apiId: string;
  let account: TestAccount;

  const get = (url: string, key: string, headers: Record<string, string> = {}) =>
    app.inject({ method: 'GET', url, headers: { ...bearer(key), ...headers } });
  const balanceOf = async (accountId: string) =>
    (await app.deps.sql<{ b: bigint }[]>`select balance_micros as b from accounts where id = ${accountId}`)[0]!.b;
  async function wholeStatement(key: string, query = ''): Promise<Entry[]> {
    const entries: Entry[] = [];
    let cursor: string | null = null;
    for (let pages = 0; pages < 100; pages += 1) {
      const url: string = `/api/v1/statement?limit=3${query}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
      const page: Statement = expectOk<Statement>(await get(url, key));
      expect(page.entries.length).toBeLessThanOrEqual(3);
      entries.push(...page.entries);
      cursor = page.nextCursor;
      if (!cursor) return entries;
    }
    throw new Error('statement pages never ended');
  }

  beforeAll(async () => {
    upstream = await startUpstream((req, res) => {
      const fail = (req.url ?? '').includes('boom');
      res.writeHead(fail ? 503 : 200, { 'content-type': 'text/plain' });
      res.end(fail ? 'down' : 'ok');
    });
    // Credit reservation from the first call a second, settled only when asked (or at close): calls
    // charged from a hold reach the ledger when the hold is settled.
    app = await createTestApp({
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: uniqueId('statement'),
      CREDIT_HOLD_MIN_CALLS_PER_SECOND: '1',
      CREDIT_HOLD_SETTLE_MS: '10000',
      BILLING_MODE: 'sandbox',
    });
    await app.listen({ host: '127.0.0.1', port: 0 });
    edge = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
    apiId = await registerApi({ baseUrl: upstream.url, price: '0.003' });

    account = await createTestAccount(app.deps.sql, { balanceMicros: 250_000n });
    // A top-up, as a person makes it in sandbox billing mode.
    expectOk(await app.inject({ method: 'POST', url: '/api/v1/balance', headers: bearer(account.fullKey), payload: { amount: 2 } }));
    const proxy = (path: string) => rawRequest(edge, { method: 'GET', path: `/api/v1/proxy/${apiId}${path}`, headers: bearer(account.fullKey) });
    for (let i = 0; i < 6; i += 1) expect((await proxy(`/items/${i}`)).status).toBe(200);
    for (let i = 0; i < 3; i += 1) expect((await proxy(`/boom/${i}`)).status).toBe(503);
    expect((await proxy(`/keys/${SECRET}/x?token=${SECRET}`)).status).toBe(200);
    // Instructions: a priced read that is not a proxied call.
    expectOk(await get(`/api/v1/apis/${apiId}/instructions`, account.fullKey));
    // Settle the holds: their calls' ledger rows are written now.
    await app.charges.flush();
  }, 60_000);
  afterAll(async () => {
    await app?.close();
    await upstream?.close();
  });

  it('has every ledger movement in posting order, each balance following from the last, and the total is the balance', async () => {
    const entries = await wholeStatement(account.fullKey);
    const kinds = entries.map((entry) => entry.kind);
    // The opening credit and the top-up; 7 served calls, 3 refunded ones (charge and refund each), instructions.
    expect(kinds.filter((kind) => kind === 'adjustment')).toHaveLength(1);
    expect(kinds.filter((kind) => kind === 'topup')).toHaveLength(1);
    expect(kinds.filter((kind) => kind === 'charge')).toHaveLength(11);
    expect(kinds.filter((kind) => kind === 'refund')).toHaveLength(3);
    // Some calls were charged from a credit hold, written when it was settled.
    expect(
      entries.some((entry) => entry.kind === 'charge' && entry.holdId !== null),
      JSON.stringify(entries),
    ).toBe(true);

    let running = 0n;
    for (const entry of entries) {
      running += BigInt(entry.amountMicros);
      expect(BigInt(entry.balanceAfterMicros), JSON.stringify(entry)).toBe(running);
      expect(entry.amount).toBe(Number(entry.amountMicros) / 1_000_000);
    }
    const balance = await balanceOf(account.accountId);
    expect(balance).toBe(250_000n + 2_000_000n - 7n * 3_000n - 10_000n);
    expect(running).toBe(balance);

    const { summary } = expectOk<Statement>(await get('/api/v1/statement', account.fullKey));
    expect(summary).toMatchObject({
      entries: entries.length,
      creditsMicros: String(250_000n + 2_000_000n + 3n * 3_000n),
      debitsMicros: String(-(10n * 3_000n + 10_000n)),
      netMicros: balance.toString(),
      openingBalance: 0,
      openingBalanceMicros: '0',
      closingBalanceMicros: balance.toString(),
    });
    // GET /balance says the same.
    expect(expectOk<{ balance: number }>(await get('/api/v1/balance', account.fullKey)).balance).toBe(Number(balance) / 1_000_000);

    // Each refund returns a charge of the statement; proxy charges show the redacted path only.
    const ids = new Set(entries.map((entry) => entry.id));
    for (const refund of entries.filter((entry) => entry.kind === 'refund')) {
      expect(ids.has(refund.refundOf!)).toBe(true);
      expect(refund.amountMicros).toBe('3000');
    }
    expect(JSON.stringify(entries)).not.toContain(SECRET);
    expect(entries.find((entry) => entry.description?.startsWith('GET /keys/'))?.description).toBe('GET /keys/{redacted}/x');
  });

  it('answers a period: totals of what is in it, opening and closing balances that agree', async () => {
    const entries = await wholeStatement(account.fullKey);
    const topup = entries.find((entry) => entry.kind === 'topup')!;
    // From the top-up on (to the end).
    const from = encodeURIComponent(topup.at);
    const period = expectOk<Statement>(await get(`/api/v1/statement?from=${from}&limit=200`, account.fullKey));
    const inPeriod = entries.filter((entry) => entry.at >= topup.at);
    expect(period.entries.map((entry) => entry.id)).toEqual(inPeriod.map((entry) => entry.id));
    expect(period.summary.openingBalanceMicros).toBe('250000');
    expect(BigInt(period.summary.openingBalanceMicros!) + BigInt(period.summary.netMicros)).toBe(BigInt(period.summary.closingBalanceMicros!));
    expect(period.from).toBe(new Date(topup.at).toISOString());
    // Before the top-up: the opening credit only.
    const before = expectOk<Statement>(await get(`/api/v1/statement?to=${from}`, account.fullKey));
    expect(before.entries.map((entry) => entry.kind)).toEqual(['adjustment']);
    expect(before.summary).toMatchObject({ entries: 1, openingBalanceMicros: '0', closingBalanceMicros: '250000' });
    // A period with nothing in it.
    const empty = expectOk<Statement>(await get('/api/v1/statement?from=2999-01-01', account.fullKey));
    expect(empty).toMatchObject({
      entries: [],
      nextCursor: null,
      summary: { entries: 0, netMicros: '0', openingBalance: null, closingBalance: null },
    });
  });

  it('answers the whole period as CSV for Accept: text/csv or format=csv', async () => {
    const entries = await wholeStatement(account.fullKey);
    for (const res of [
      await get('/api/v1/statement?format=csv', account.fullKey),
      await get('/api/v1/statement', account.fullKey, { accept: 'text/csv' }),
    ]) {
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toBe('text/csv; charset=utf-8');
      expect(res.headers['content-disposition']).toBe('attachment; filename="statement.csv"');
      const lines = res.body.split('\r\n');
      expect(lines.at(-1)).toBe('');
      expect(lines[0]).toBe(STATEMENT_CSV_COLUMNS.join(','));
      const rows = lines.slice(1, -1).map((line) => line.split(','));
      expect(rows).toHaveLength(entries.length);
      expect(rows.map((row) => row[0])).toEqual(entries.map((entry) => entry.id));
      const amount = STATEMENT_CSV_COLUMNS.indexOf('amount_micros');
      const after = STATEMENT_CSV_COLUMNS.indexOf('balance_after_micros');
      const total = rows.reduce((sum, row) => sum + BigInt(row[amount]!), 0n);
      expect(total).toBe(await balanceOf(account.accountId));
      expect(rows.at(-1)![after]).toBe(String(await balanceOf(account.accountId)));
      expect(rows.find((row) => row[2] === 'topup')![STATEMENT_CSV_COLUMNS.indexOf('amount')]).toBe('2');
      expect(res.body).not.toContain(SECRET);
    }
    const period = await get('/api/v1/statement?format=csv&from=2026-01-01&to=2999-01-01', account.fullKey);
    expect(period.headers['content-disposition']).toBe('attachment; filename="statement-from-2026-01-01-to-2999-01-01.csv"');
    // JSON stays the default when both are acceptable.
    expect(expectOk(await get('/api/v1/statement', account.fullKey, { accept: 'application/json, text/csv' }))).toHaveProperty('summary');
  });

  it("shows another account none of this one's movements", async () => {
    const other = await createTestAccount(app.deps.sql);
    expect(expectOk<Statement>(await get('/api/v1/statement', other.fullKey))).toMatchObject({ entries: [], summary: { entries: 0 } });
    const csv = await get('/api/v1/statement?format=csv', other.fullKey);
    expect(csv.body).toBe(`${STATEMENT_CSV_COLUMNS.join(',')}\r\n`);
  });

  it('answers bad input with 400 in the one error shape', async () => {
    const bad = async (query: string, field: string) => {
      const body = expectError(await get(`/api/v1/statement?${query}`, account.fullKey), 400, 'validation_failed');
      expect(JSON.stringify(body)).toContain(field);
    };
    await bad('from=last-week', 'from');
    await bad('to=2026-02-30T25:00:00Z', 'to');
    await bad('from=2026-02-01&to=2026-01-01', 'from');
    await bad('format=xml', 'format');
    await bad('limit=0', 'limit');
    await bad('cursor=abc', 'cursor');
    await bad(`cursor=${Buffer.from('["a","2026-01-01T00:00:00.000000Z","00000000-0000-0000-0000-000000000000"]').toString('base64url')}`, 'cursor');
    // The CSV answer checks its period before it starts.
    expectError(await get('/api/v1/statement?format=csv&from=2026-02-01&to=2026-01-01', account.fullKey), 400, 'validation_failed');
  });
});

describeAuthCases({ app: () => authApp, method: 'GET', url: '/api/v1/statement', accountOnly: true });
let authApp: FastifyInstance;
beforeAll(async () => {
  authApp = await createTestApp({ REDIS_PREFIX: uniqueId('statementauth') });
});
afterAll(async () => {
  await authApp?.close();
});
