import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { reconcileRefunds } from '#core/billing';
import { sessionEventsKey } from '#core/cookbooks';
import { createRedis } from '#core/platform';
import { insertStartedSession } from '#db/cookbook-sessions';
import { loadCookbooks } from '#db/cookbooks';
import { createDashboardSession } from '#db/dashboard-sessions';
import { charge } from '#db/ledger';
import { recordUsageEvents } from '#db/usage';
import { METERED_TABLES, tablesWithoutAutovacuum } from '#db/retention';
import { createSql, type Sql } from '#db/sql';
import { createTestAccount } from '#fixtures/accounts';
import { retentionJob, retentionProcessor, runRetention, scheduleRetention } from '#workers/queues/retention';
import { loadWorkerSettings } from '#workers/settings';
import { workflowIdFor } from '#workflows/messages';
import { startChaosPostgres } from '../chaos/services.js';
import { testDatabaseUrl, uniqueId } from '../helpers/settings.js';

const DAY = 86_400_000;

describe("retention: a repeatable job prunes old usage events, ended sessions' results and streams, and dead dashboard sessions", () => {
  let sql: Sql;
  let redis: Redis;
  const prefix = uniqueId('retain');
  const settings = () => loadWorkerSettings({ ...process.env, DATABASE_URL: testDatabaseUrl(), REDIS_PREFIX: prefix });

  beforeAll(async () => {
    sql = createSql(testDatabaseUrl(), { max: 4 });
    redis = createRedis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', 'queue');
    await loadCookbooks(sql);
  });
  afterAll(async () => {
    await sql.end({ timeout: 5 });
    await redis.quit();
  });

  /** One account with a served charge and its usage event, an ended session with a result and its event stream, and an expired dashboard session. */
  async function seed() {
    const who = await createTestAccount(sql, { balanceMicros: 100_000n });
    const apiId = 'retention-api';
    await sql`insert into apis (id, name, provider, base_url, source) values (${apiId}, 'Retention', 'example.test', 'http://127.0.0.1:9/', 'operator') on conflict do nothing`;
    const served = await charge(sql, { accountId: who.accountId, costMicros: 2_000n, keyId: who.keyId, apiId, item: 'proxy' });
    if (!served.ok) throw new Error('charge refused');
    await recordUsageEvents(sql, [
      {
        id: randomUUID(),
        accountId: who.accountId,
        keyId: who.keyId,
        apiId,
        item: 'proxy',
        status: 200,
        latencyMs: 5,
        bytesIn: 0,
        bytesOut: 2,
        costMicros: '2000',
        chargeId: served.chargeId,
        at: new Date().toISOString(),
      },
    ]);
    const sessionId = uniqueId('ses_');
    await insertStartedSession(sql, {
      sessionId,
      accountId: who.accountId,
      cookbookId: 'weather-alert-sms',
      workflowId: workflowIdFor(sessionId),
      totalSteps: 4,
      firstStepId: 'fetch-forecast',
      selectedApis: {},
      idempotencyKey: null,
      startedAt: new Date(),
    });
    await sql`update cookbook_sessions set status = 'completed', ended_at = now() where id = ${sessionId}`;
    await sql`insert into cookbook_session_steps (session_id, step_id, position, kind, status, result_data, completed_by, started_at, completed_at)
              values (${sessionId}, 'fetch-forecast', 0, 'agent', 'completed', ${sql.json({ secret: 'forecast' })}, 'key', now(), now())`;
    await redis.xadd(sessionEventsKey(prefix, sessionId), '*', 'event', 'session.completed', 'data', '{}');
    await createDashboardSession(sql, { accountId: who.accountId, expiresAt: new Date(Date.now() - 60_000) });
    return { who, served, sessionId };
  }

  const state = async (who: { accountId: string }, sessionId: string) => {
    const [events] = await sql<{ n: number }[]>`select count(*)::int as n from usage_events where account_id = ${who.accountId}`;
    const [daily] = await sql<{ n: number }[]>`select coalesce(sum(calls), 0)::int as n from usage_daily where account_id = ${who.accountId}`;
    const [step] = await sql<{ result_data: unknown }[]>`select result_data from cookbook_session_steps where session_id = ${sessionId}`;
    const [session] = await sql<{ pruned_at: Date | null }[]>`select pruned_at from cookbook_sessions where id = ${sessionId}`;
    const [dashboard] = await sql<{ n: number }[]>`select count(*)::int as n from dashboard_sessions where account_id = ${who.accountId}`;
    return {
      usageEvents: events!.n,
      usageDailyCalls: daily!.n,
      resultData: step!.result_data,
      pruned: session!.pruned_at !== null,
      stream: await redis.exists(sessionEventsKey(prefix, sessionId)),
      dashboardSessions: dashboard!.n,
    };
  };

  it('keeps everything younger than its retention period', async () => {
    const { who, sessionId } = await seed();
    await runRetention({ sql, redis, settings: settings() });
    expect(await state(who, sessionId)).toEqual({
      usageEvents: 1,
      usageDailyCalls: 1,
      resultData: { secret: 'forecast' },
      pruned: false,
      stream: 1,
      dashboardSessions: 1,
    });
  });

  it('prunes what is past it, keeps usage_daily and the ledger, and never makes the refund reconciler pay back a served charge', async () => {
    const { who, served, sessionId } = await seed();
    const later = new Date(Date.now() + 100 * DAY);
    // The authorization server's rows: a token expiring before `later` goes, a registered client (no expiry) stays.
    const tokenId = `retention-${sessionId}`;
    await sql`insert into oauth_provider_models (kind, id, payload, expires_at) values
      ('AccessToken', ${tokenId}, '{}'::jsonb, now() + interval '1 hour'), ('Client', ${tokenId}, '{}'::jsonb, null)`;
    // What discovery listed to the account (discovery's feedback): gone once older than its window.
    await sql`insert into discovery_listings (account_id, api_ids) values (${who.accountId}, ${['retention-api']})`;
    const report = await runRetention({ sql, redis, settings: settings() }, later);
    expect(report.discoveryListings).toBeGreaterThanOrEqual(1);
    expect(await sql`select 1 from discovery_listings where account_id = ${who.accountId}`).toHaveLength(0);
    expect(report.oauthProviderModels).toBeGreaterThanOrEqual(1);
    const providerRows = await sql<{ kind: string }[]>`select kind from oauth_provider_models where id = ${tokenId}`;
    expect(providerRows.map((row) => row.kind)).toEqual(['Client']);
    expect(report.usageEvents).toBeGreaterThanOrEqual(1);
    expect(report.sessions).toBeGreaterThanOrEqual(1);
    expect(report.eventStreams).toBeGreaterThanOrEqual(1);
    expect(report.dashboardSessions).toBeGreaterThanOrEqual(1);
    expect(await state(who, sessionId)).toEqual({
      usageEvents: 0,
      usageDailyCalls: 1,
      resultData: null,
      pruned: true,
      stream: 0,
      dashboardSessions: 0,
    });
    // The served charge has lost its usage event; the reconciler would take that for "no outcome".
    await reconcileRefunds(sql, 0);
    const refunds = await sql`select id from ledger_entries where refund_of = ${served.ok ? served.chargeId : ''}`;
    expect(refunds).toHaveLength(0);
    const [account] = await sql<{ b: bigint }[]>`select balance_micros as b from accounts where id = ${who.accountId}`;
    expect(account!.b).toBe(98_000n);
    // Running again finds nothing left to do.
    expect(await runRetention({ sql, redis, settings: settings() }, later)).toMatchObject({ sessions: 0, eventStreams: 0 });
  });

  it('is scheduled once as a repeatable job and processed by the queue workers', async () => {
    const queue = new Queue(retentionJob.queue, { connection: redis, prefix });
    try {
      await scheduleRetention(queue, 3_600);
      await scheduleRetention(queue, 3_600);
      const schedulers = await queue.getJobSchedulers();
      expect(schedulers.map((s) => s.key)).toEqual([retentionJob.name]);
      const processor = retentionProcessor({ sql, redis, settings: settings(), log: pino({ level: 'silent' }) });
      expect(processor.job).toBe(retentionJob);
      await expect(processor.process({ data: {} } as never)).resolves.toMatchObject({ usageEvents: expect.any(Number) });
    } finally {
      await queue.obliterate({ force: true });
      await queue.close();
    }
  });
});

describe('the tables autovacuum does not look after (warned about by the queue workers at start)', () => {
  it('names every table the metered path writes when the server runs without autovacuum, else those that turned it off themselves', async () => {
    const sql = createSql(testDatabaseUrl(), { max: 1 });
    try {
      const [row] = await sql<{ server: string }[]>`select current_setting('autovacuum') as server`;
      const everyTable = [...METERED_TABLES].sort();
      await sql`alter table usage_daily set (autovacuum_enabled = off)`;
      expect(await tablesWithoutAutovacuum(sql)).toEqual(row!.server === 'off' ? everyTable : ['usage_daily']);
      await sql`alter table usage_daily reset (autovacuum_enabled)`;
      expect(await tablesWithoutAutovacuum(sql)).toEqual(row!.server === 'off' ? everyTable : []);
    } finally {
      await sql`alter table usage_daily reset (autovacuum_enabled)`;
      await sql.end({ timeout: 5 });
    }
  });

  it('names a table that turned autovacuum off itself, on a server that runs it (a throwaway cluster: the shared one may not)', async () => {
    const cluster = await startChaosPostgres();
    const sql = createSql(cluster.url, { max: 1 });
    try {
      expect((await sql<{ server: string }[]>`select current_setting('autovacuum') as server`)[0]!.server).toBe('on');
      for (const table of METERED_TABLES) await sql.unsafe(`create table ${table} (id int)`);
      expect(await tablesWithoutAutovacuum(sql)).toEqual([]);
      await sql`alter table usage_daily set (autovacuum_enabled = off)`;
      await sql`alter table credit_holds set (autovacuum_enabled = false, fillfactor = 90)`;
      await sql`alter table accounts set (autovacuum_enabled = on)`;
      expect(await tablesWithoutAutovacuum(sql)).toEqual(['credit_holds', 'usage_daily']);
    } finally {
      await sql.end({ timeout: 5 });
      await cluster.destroy();
    }
  }, 120_000);
});
