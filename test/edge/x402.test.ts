import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { decodePaymentRequiredHeader, decodePaymentResponseHeader, encodePaymentSignatureHeader } from '@x402/core/http';
import type { PaymentPayload, PaymentRequirements } from '@x402/core/types';
import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createTestAccount, type TestAccount } from '#fixtures/accounts';
import { chargesOwedARefund } from '#db/ledger';
import { runPaymentsCli } from '#cli/payments-cli';
import { createRedis } from '#core/platform';
import { usageProcessor } from '#workers/queues/usage';
import { Worker } from 'bullmq';
import { bearer, createTestApp, expectError, expectOk } from '../helpers/app.js';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';
import { eventually } from '../helpers/until.js';
import { registerApi, startUpstream, type TestUpstream } from '../helpers/upstream.js';

const PAY_TO = '0x00000000000000000000000000000000000a11ce';
const NETWORK = 'eip155:84532';

/**
 * x402 version 2 (issue 16), against a local facilitator this test runs and controls (the
 * specification's /verify, /settle and /supported): the 402's PAYMENT-REQUIRED header, a valid
 * payment served and settled with PAYMENT-RESPONSE and a ledger pair, replays, refusals, mismatches,
 * a malformed header, a settlement that fails after serving, a settled payment the ledger could not
 * take (recorded later by the operator command), and the metered proxy.
 */
describe('x402 per-call payments', () => {
  let app: FastifyInstance;
  let facilitator: Server;
  let upstream: TestUpstream;
  let apiId: string;
  const calls: { path: string; body: { x402Version: number; paymentPayload: PaymentPayload; paymentRequirements: PaymentRequirements } }[] = [];
  let verifyAnswer: () => { status: number; body: unknown };
  /** Each test's own wallet: a payer's refused settlement keeps that payer out for a while. */
  let payer: string;
  /** A /slow upstream call waits for this (set when it arrives). */
  let releaseSlow: (() => void) | null = null;
  let settleAnswer: () => { status: number; body: unknown };

  beforeAll(async () => {
    facilitator = createServer((req, res) => {
      let text = '';
      req.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
      req.on('end', () => {
        const answer = (status: number, body: unknown) => {
          res.writeHead(status, { 'content-type': 'application/json' });
          res.end(JSON.stringify(body));
        };
        if (req.method === 'GET' && req.url === '/supported')
          return answer(200, { kinds: [{ x402Version: 2, scheme: 'exact', network: NETWORK }], extensions: [], signers: {} });
        const body = JSON.parse(text || '{}');
        calls.push({ path: req.url ?? '', body });
        if (req.url === '/verify') {
          const { status, body: out } = verifyAnswer();
          return answer(status, out);
        }
        if (req.url === '/settle') {
          const { status, body: out } = settleAnswer();
          return answer(status, out);
        }
        answer(404, { error: 'not found' });
      });
    });
    await new Promise<void>((resolve) => facilitator.listen(0, '127.0.0.1', resolve));
    upstream = await startUpstream((req, res) => {
      if (req.url?.includes('slow')) {
        releaseSlow = () => {
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end('{"slow":"done"}');
        };
        return;
      }
      if (req.url?.includes('missing')) {
        res.writeHead(404, { 'content-type': 'application/json' });
        res.end('{"error":"no such city"}');
        return;
      }
      if (req.url?.includes('empty')) {
        res.writeHead(204);
        res.end();
        return;
      }
      res.writeHead(req.url?.includes('fail') ? 500 : 200, { 'content-type': 'application/json' });
      res.end('{"forecast":"sunny"}');
    });
    apiId = await registerApi({ baseUrl: upstream.url, price: '0.002' });
    app = await createTestApp({
      X402_FACILITATOR_URL: `http://127.0.0.1:${(facilitator.address() as AddressInfo).port}`,
      X402_PAY_TO: PAY_TO,
      X402_NETWORK: NETWORK,
      ALLOW_PRIVATE_UPSTREAMS: 'true',
      REDIS_PREFIX: uniqueId('x402'),
      // Room for one proxied call ($0.002) of a payer in flight, not two.
      X402_PAYER_MAX_UNSETTLED_DOLLARS: '0.003',
    });
  });
  afterAll(async () => {
    await app?.close();
    await upstream?.close();
    await new Promise<void>((resolve) => facilitator?.close(() => resolve()));
  });
  beforeEach(() => {
    calls.length = 0;
    payer = uniqueId('0xpayer');
    verifyAnswer = () => ({ status: 200, body: { isValid: true, payer } });
    settleAnswer = () => ({ status: 200, body: { success: true, transaction: `0xtx${Date.now()}`, network: NETWORK, payer } });
  });

  const instructions = (account: TestAccount, headers: Record<string, string> = {}) =>
    app.inject({ method: 'GET', url: '/api/v1/apis/twilio.com-api/instructions', headers: { ...bearer(account.fullKey), ...headers } });
  /** What a client builds from the 402's PAYMENT-REQUIRED header (the signature itself is the facilitator's business). */
  const paymentFor = (requirements: PaymentRequirements, nonce = uniqueId('nonce')) =>
    encodePaymentSignatureHeader({
      x402Version: 2,
      accepted: requirements,
      payload: { signature: `0xsig-${nonce}`, authorization: { from: payer, to: requirements.payTo, value: requirements.amount, nonce } },
    });
  const offered = async (account: TestAccount) => {
    const refused = await instructions(account);
    expectError(refused, 402, 'insufficient_balance');
    return decodePaymentRequiredHeader(String(refused.headers['payment-required']));
  };
  const ledger = (account: TestAccount) =>
    app.deps.sql<{ kind: string; amount_micros: bigint; balance_after_micros: bigint; id: string }[]>`
      select id, kind, amount_micros, balance_after_micros from ledger_entries where account_id = ${account.accountId} order by seq`;

  it('a 402 carries PAYMENT-REQUIRED (x402Version 2, the exact scheme, the amount in atomic units) beside the unchanged body', async () => {
    const account = await createTestAccount(app.deps.sql);
    const refused = await instructions(account);
    const body = expectError(refused, 402, 'insufficient_balance');
    expect(body).toMatchObject({ balance: 0, cost: 0.01 });
    const required = decodePaymentRequiredHeader(String(refused.headers['payment-required']));
    expect(required).toMatchObject({
      x402Version: 2,
      resource: { url: expect.stringMatching(/\/api\/v1\/apis\/twilio\.com-api\/instructions$/) },
      accepts: [{ scheme: 'exact', network: NETWORK, amount: '10000', payTo: PAY_TO, asset: expect.any(String), maxTimeoutSeconds: 120 }],
    });
  });

  it('serves a call paid with a valid payment: verify, serve, settle, PAYMENT-RESPONSE, and an x402 credit and a charge in the ledger', async () => {
    const account = await createTestAccount(app.deps.sql);
    const required = await offered(account);
    const res = await instructions(account, { 'payment-signature': paymentFor(required.accepts[0]!) });
    const body = expectOk<{ instructions: string }>(res);
    expect(body.instructions.length).toBeGreaterThan(10);
    expect(calls.map((c) => c.path)).toEqual(['/verify', '/settle']);
    expect(calls[0]!.body).toMatchObject({
      x402Version: 2,
      paymentRequirements: required.accepts[0],
      paymentPayload: { accepted: required.accepts[0] },
    });
    const settled = decodePaymentResponseHeader(String(res.headers['payment-response']));
    expect(settled).toMatchObject({ success: true, network: NETWORK, transaction: expect.stringMatching(/^0xtx/) });
    expect(res.headers['x-service-cost']).toBe('0.01');
    const entries = await ledger(account);
    expect(entries.map((e) => [e.kind, e.amount_micros, e.balance_after_micros])).toEqual([
      ['x402_credit', 10_000n, 10_000n],
      ['charge', -10_000n, 0n],
    ]);
    expect(res.headers['x-service-charge-id']).toBe(entries[1]!.id);
    const [payment] = await app.deps.sql<
      { status: string; transaction: string }[]
    >`select status, transaction from x402_payments where account_id = ${account.accountId}`;
    expect(payment).toMatchObject({ status: 'settled', transaction: settled.transaction });
  });

  it('the same payment presented twice serves once', async () => {
    const account = await createTestAccount(app.deps.sql);
    const header = paymentFor((await offered(account)).accepts[0]!);
    expectOk(await instructions(account, { 'payment-signature': header }));
    const again = await instructions(account, { 'payment-signature': header });
    expect(expectError(again, 402, 'payment_invalid').error).toContain('presented before');
    expect(again.headers['payment-required']).toBeDefined();
    // The same signed payment re-encoded (other key order and spacing) is still the same payment.
    const decoded = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as Record<string, unknown>;
    const reordered = Buffer.from(JSON.stringify(Object.fromEntries(Object.entries(decoded).reverse()), null, 2)).toString('base64');
    expect(expectError(await instructions(account, { 'payment-signature': reordered }), 402, 'payment_invalid').error).toContain('presented before');
    expect(calls.filter((c) => c.path === '/verify')).toHaveLength(1);
    expect((await ledger(account)).filter((e) => e.kind === 'charge')).toHaveLength(1);
  });

  it('refuses a payment the facilitator finds invalid, and payments for another amount or network without asking it', async () => {
    const account = await createTestAccount(app.deps.sql);
    const requirements = (await offered(account)).accepts[0]!;
    verifyAnswer = () => ({ status: 200, body: { isValid: false, invalidReason: 'invalid_exact_evm_payload_signature', payer: '0xpayer' } });
    expect(expectError(await instructions(account, { 'payment-signature': paymentFor(requirements) }), 402, 'payment_invalid').error).toContain(
      'invalid_exact_evm_payload_signature',
    );
    verifyAnswer = () => ({ status: 400, body: { isValid: false, invalidReason: 'insufficient_funds' } });
    expect(expectError(await instructions(account, { 'payment-signature': paymentFor(requirements) }), 402, 'payment_invalid').error).toContain(
      'insufficient_funds',
    );
    calls.length = 0;
    const cheap = await instructions(account, { 'payment-signature': paymentFor({ ...requirements, amount: '1' }) });
    expect(expectError(cheap, 402, 'payment_invalid').error).toContain('amount 1 is not the price');
    const elsewhere = await instructions(account, { 'payment-signature': paymentFor({ ...requirements, network: 'eip155:1' }) });
    expect(expectError(elsewhere, 402, 'payment_invalid').error).toContain('network eip155:1');
    const notUs = await instructions(account, { 'payment-signature': paymentFor({ ...requirements, payTo: '0xsomeoneelse' }) });
    expect(expectError(notUs, 402, 'payment_invalid').error).toContain('payTo');
    expect(calls).toHaveLength(0);
    expect(await ledger(account)).toHaveLength(0);
  });

  it('answers 400 to a malformed PAYMENT-SIGNATURE', async () => {
    const account = await createTestAccount(app.deps.sql);
    expectError(await instructions(account, { 'payment-signature': 'not base64 json' }), 400, 'validation_failed');
    expectError(await instructions(account, { 'payment-signature': Buffer.from('{"x402Version":2}').toString('base64') }), 400, 'validation_failed');
    expect(calls).toHaveLength(0);
  });

  it('withholds the answer when the settlement fails after serving: 402, nothing in the ledger', async () => {
    const account = await createTestAccount(app.deps.sql);
    const requirements = (await offered(account)).accepts[0]!;
    settleAnswer = () => ({ status: 200, body: { success: false, errorReason: 'insufficient_funds', transaction: '', network: NETWORK } });
    const res = await instructions(account, { 'payment-signature': paymentFor(requirements) });
    const body = expectError(res, 402, 'payment_invalid');
    expect(body.error).toContain('could not be settled (insufficient_funds)');
    expect(res.body).not.toContain('instructions');
    expect(res.headers['payment-required']).toBeDefined();
    expect(await ledger(account)).toHaveLength(0);
    const [payment] = await app.deps.sql<{ status: string }[]>`select status from x402_payments where account_id = ${account.accountId}`;
    expect(payment?.status).toBe('settle_failed');
  });

  it('does not say nothing was charged when the facilitator gives no verdict: the transfer may still land', async () => {
    const account = await createTestAccount(app.deps.sql);
    const requirements = (await offered(account)).accepts[0]!;
    settleAnswer = () => ({ status: 502, body: 'bad gateway' });
    const res = await instructions(account, { 'payment-signature': paymentFor(requirements) });
    const body = expectError(res, 402, 'payment_invalid');
    expect(body.error).toContain('did not confirm the settlement');
    expect(body.hint).toContain('may still land');
    expect(body.hint).not.toContain('Nothing was charged');
    expect(res.body).not.toContain('instructions');
    expect(await ledger(account)).toHaveLength(0);
    const [payment] = await app.deps.sql<
      { status: string; reason: string | null }[]
    >`select status, reason from x402_payments where account_id = ${account.accountId}`;
    expect(payment).toMatchObject({ status: 'settle_failed', reason: 'facilitator_unreachable' });
    // No verdict is not the payer's doing: the same wallet pays again at once.
    settleAnswer = () => ({ status: 200, body: { success: true, transaction: `0xtx${Date.now()}`, network: NETWORK, payer } });
    expectOk(await instructions(account, { 'payment-signature': paymentFor(requirements) }));
  });

  it('serves a settled payment whose ledger write fails, keeps it as settled_unrecorded with its call, and an operator records it once', async () => {
    const account = await createTestAccount(app.deps.sql);
    const required = await offered(account);
    // The ledger refuses this account's x402 credit, as a database failing at that moment would.
    const refuse = `refuse_x402_${account.accountId.replace(/-/g, '')}`;
    await app.deps.sql.unsafe(`
      create function ${refuse}() returns trigger language plpgsql as $$
      begin
        if new.account_id = '${account.accountId}' and new.kind = 'x402_credit' then raise exception 'ledger unavailable (test)'; end if;
        return new;
      end $$;
      create trigger ${refuse} before insert on ledger_entries for each row execute function ${refuse}();`);
    let hash: string;
    try {
      const res = await instructions(account, { 'payment-signature': paymentFor(required.accepts[0]!) });
      // Paid on chain: the caller gets the answer and the settlement.
      expectOk(res);
      const settled = decodePaymentResponseHeader(String(res.headers['payment-response']));
      expect(await ledger(account)).toEqual([]);
      const [kept] = await app.deps.sql<{ payload_hash: Buffer; status: string; transaction: string; network: string; call: unknown }[]>`
        select payload_hash, status, transaction, network, call from x402_payments where account_id = ${account.accountId}`;
      expect(kept).toMatchObject({ status: 'settled_unrecorded', transaction: settled.transaction, network: NETWORK });
      expect(kept!.call).toMatchObject({ keyId: account.keyId, item: expect.any(String) });
      hash = kept!.payload_hash.toString('hex');
    } finally {
      await app.deps.sql.unsafe(`drop trigger ${refuse} on ledger_entries; drop function ${refuse}();`);
    }

    const cli = (argv: string[]) => runPaymentsCli(argv, { ...process.env, DATABASE_URL: testDatabaseUrl() });
    const listed = await cli(['x402-unrecorded']);
    expect(listed).toContain(`hash ${hash}`);
    expect(listed).toContain('$0.01');
    expect(await cli(['x402-record', '--hash', hash])).toMatch(/^recorded: charge /);
    const entries = await ledger(account);
    expect(entries.map((e) => [e.kind, e.amount_micros, e.balance_after_micros])).toEqual([
      ['x402_credit', 10_000n, 10_000n],
      ['charge', -10_000n, 0n],
    ]);
    const [payment] = await app.deps.sql<
      { status: string; charge_id: string }[]
    >`select status, charge_id from x402_payments where account_id = ${account.accountId}`;
    expect(payment).toEqual({ status: 'settled', charge_id: entries[1]!.id });
    // Twice records once; bad input is refused with a hint.
    await expect(cli(['x402-record', '--hash', hash])).rejects.toThrow(/no payment .* is waiting to be recorded/);
    await expect(cli(['x402-record', '--hash', 'zz'])).rejects.toThrow(/--hash is required/);
    await expect(cli(['x402-recrod'])).rejects.toThrow(/unknown command/);
    expect(await ledger(account)).toHaveLength(2);
    expect(await cli(['x402-unrecorded'])).not.toContain(hash);
    // The call's usage shows what was paid on chain, once: the usage worker stores what the edge handed over.
    const workerRedis = createRedis(app.deps.settings.REDIS_URL, 'queue');
    const processor = usageProcessor({ sql: app.deps.sql });
    const worker = new Worker(processor.job.queue, processor.process, { connection: workerRedis, prefix: app.deps.settings.REDIS_PREFIX });
    try {
      await app.usage.flush();
      const usage = await eventually(
        'the paid call in the usage',
        async () => {
          const body = expectOk<{ totals: { calls: number; cost: number } }>(
            await app.inject({ method: 'GET', url: '/api/v1/usage', headers: bearer(account.fullKey) }),
          );
          return body.totals.calls > 0 ? body.totals : undefined;
        },
        { timeoutMs: 10_000 },
      );
      expect(usage).toMatchObject({ calls: 1, cost: 0.01 });
    } finally {
      await worker.close();
      await workerRedis.quit();
    }
  });

  it('pays for a metered proxy call; a failed upstream call is not settled', async () => {
    const account = await createTestAccount(app.deps.sql);
    const proxy = (path: string, headers: Record<string, string> = {}) =>
      app.inject({ method: 'GET', url: `/api/v1/proxy/${apiId}${path}`, headers: { ...bearer(account.fullKey), ...headers } });
    const refused = await proxy('/forecast');
    expectError(refused, 402, 'insufficient_balance');
    const requirements = decodePaymentRequiredHeader(String(refused.headers['payment-required'])).accepts[0]!;
    expect(requirements.amount).toBe('2000');
    const paid = await proxy('/forecast', { 'payment-signature': paymentFor(requirements) });
    expect(paid.statusCode, paid.body).toBe(200);
    expect(paid.body).toBe('{"forecast":"sunny"}');
    expect(decodePaymentResponseHeader(String(paid.headers['payment-response'])).success).toBe(true);
    calls.length = 0;
    const failed = await proxy('/fail', { 'payment-signature': paymentFor(requirements) });
    expect(failed.statusCode).toBe(502);
    expect(calls.map((c) => c.path)).toEqual(['/verify']);
    const empty = await proxy('/empty', { 'payment-signature': paymentFor(requirements) });
    expect(empty.statusCode).toBe(204);
    expect(decodePaymentResponseHeader(String(empty.headers['payment-response'])).success).toBe(true);
    const entries = await ledger(account);
    expect(entries.map((e) => e.kind)).toEqual(['x402_credit', 'charge', 'x402_credit', 'charge']);
    // Paid from outside: the refund reconciler never returns these charges into the balance.
    const owed = await chargesOwedARefund(app.deps.sql, 0);
    expect(owed.map((o) => o.id)).not.toContain(entries[1]!.id);
    expect(owed.map((o) => o.id)).not.toContain(entries[3]!.id);
  });

  it('settles a proxied call the upstream answered with a 4xx: it was forwarded, as a balance-paid call keeps its charge (finding 11)', async () => {
    const account = await createTestAccount(app.deps.sql);
    const refused = await app.inject({ method: 'GET', url: `/api/v1/proxy/${apiId}/missing`, headers: bearer(account.fullKey) });
    const requirements = decodePaymentRequiredHeader(String(refused.headers['payment-required'])).accepts[0]!;
    const res = await app.inject({
      method: 'GET',
      url: `/api/v1/proxy/${apiId}/missing`,
      headers: { ...bearer(account.fullKey), 'payment-signature': paymentFor(requirements) },
    });
    expect(res.statusCode, res.body).toBe(404);
    expect(res.body).toBe('{"error":"no such city"}');
    expect(calls.map((c) => c.path)).toEqual(['/verify', '/settle']);
    expect(decodePaymentResponseHeader(String(res.headers['payment-response'])).success).toBe(true);
    expect((await ledger(account)).map((e) => [e.kind, e.amount_micros])).toEqual([
      ['x402_credit', 2000n],
      ['charge', -2000n],
    ]);
  });

  it('keeps a payer whose settlement the facilitator refused (an emptied wallet) from paying per call for a while, before serving (finding 11)', async () => {
    const account = await createTestAccount(app.deps.sql);
    const requirements = (await offered(account)).accepts[0]!;
    settleAnswer = () => ({ status: 200, body: { success: false, errorReason: 'insufficient_funds', transaction: '', network: NETWORK } });
    expectError(await instructions(account, { 'payment-signature': paymentFor(requirements) }), 402, 'payment_invalid');
    // The wallet is funded again: still refused, after verification and before the call is served or settled.
    settleAnswer = () => ({ status: 200, body: { success: true, transaction: `0xtx${Date.now()}`, network: NETWORK, payer } });
    calls.length = 0;
    const kept = await instructions(account, { 'payment-signature': paymentFor(requirements) });
    const body = expectError(kept, 402, 'payment_invalid');
    expect(body.error).toContain('could not be settled lately');
    expect(body.hint).toContain('balance');
    expect(kept.headers['retry-after']).toBe(String(app.deps.settings.X402_PAYER_COOLDOWN_SECONDS));
    expect(kept.body).not.toContain('instructions"');
    expect(calls.map((c) => c.path)).toEqual(['/verify']);
    expect(await ledger(account)).toHaveLength(0);
    // Another wallet of the same account pays as usual.
    payer = uniqueId('0xother');
    expectOk(await instructions(account, { 'payment-signature': paymentFor(requirements) }));
  });

  it("bounds a payer's calls served and not yet settled: one past X402_PAYER_MAX_UNSETTLED_DOLLARS is refused, not forwarded (finding 11)", async () => {
    const account = await createTestAccount(app.deps.sql);
    const refused = await app.inject({ method: 'GET', url: `/api/v1/proxy/${apiId}/forecast`, headers: bearer(account.fullKey) });
    const requirements = decodePaymentRequiredHeader(String(refused.headers['payment-required'])).accepts[0]!;
    const paid = (path: string) =>
      app.inject({
        method: 'GET',
        url: `/api/v1/proxy/${apiId}${path}`,
        headers: { ...bearer(account.fullKey), 'payment-signature': paymentFor(requirements) },
      });
    releaseSlow = null;
    const slow = paid('/slow');
    await eventually('the slow call at the upstream', async () => releaseSlow ?? undefined, { timeoutMs: 10_000 });
    const forwardedBefore = upstream.seen.length;
    // $0.002 in flight and $0.002 more exceed $0.003: refused before forwarding.
    const second = await paid('/forecast');
    expect(expectError(second, 402, 'payment_invalid').error).toContain('not yet settled');
    expect(upstream.seen.length).toBe(forwardedBefore);
    releaseSlow!();
    const first = await slow;
    expect(first.statusCode, first.body).toBe(200);
    expect(decodePaymentResponseHeader(String(first.headers['payment-response'])).success).toBe(true);
    // Settled, it no longer counts.
    expect((await paid('/forecast')).statusCode).toBe(200);
    expect((await ledger(account)).filter((e) => e.kind === 'charge')).toHaveLength(2);
  });

  it('where x402 is off, a 402 carries no PAYMENT-REQUIRED and a PAYMENT-SIGNATURE is refused with 400', async () => {
    const off = await createTestApp({ REDIS_PREFIX: uniqueId('x402off') });
    try {
      const account = await createTestAccount(off.deps.sql);
      const refused = await off.inject({ method: 'GET', url: '/api/v1/apis/twilio.com-api/instructions', headers: bearer(account.fullKey) });
      expectError(refused, 402, 'insufficient_balance');
      expect(refused.headers['payment-required']).toBeUndefined();
      const paid = await off.inject({
        method: 'GET',
        url: '/api/v1/apis/twilio.com-api/instructions',
        headers: { ...bearer(account.fullKey), 'payment-signature': 'x' },
      });
      expectError(paid, 400, 'validation_failed');
    } finally {
      await off.close();
    }
  });
});
