// `npm run bench:sse`: opens STREAMS (default 1,000) concurrent session event streams on one edge
// instance and shows they share one Redis subscriber, all receive a live event, and all free their
// resources when the clients go away. Runs against DATABASE_URL / REDIS_URL (migrated database);
// Temporal is not needed: the bench writes the session mirror row and appends events itself.
import { request } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildApp } from '../apps/edge/src/app.js';
import { edgeSettings } from '../apps/edge/src/config.js';
import { createAccount } from '../db/src/accounts.js';
import { appendSessionEvents, insertStartedSession } from '../db/src/cookbook-sessions.js';
import { loadCookbooks } from '../db/src/cookbooks.js';
import { createKey } from '../db/src/keys.js';
import { migrate } from '../db/src/migrate.js';

const STREAMS = Number(process.env.STREAMS ?? 1000);
const prefix = `bench${Date.now().toString(36)}`;
const settings = edgeSettings.parse({ ...process.env, LOG_LEVEL: 'warn', REDIS_PREFIX: prefix, SSE_HEARTBEAT_MS: '5000', DATABASE_POOL_MAX: '10' });
await migrate(settings.DATABASE_URL);
const app = await buildApp(settings);
const { sql, redis } = app.deps;
await loadCookbooks(sql);
const account = await createAccount(sql, { email: `${prefix}@bench.test`, passwordHash: null });
if (!account) throw new Error('account exists');
const { fullKey } = await createKey(sql, { accountId: account.id, kind: 'api', name: 'bench' });
const sessionId = `ses_${prefix}`;
await insertStartedSession(sql, {
  sessionId,
  accountId: account.id,
  cookbookId: 'weather-alert-sms',
  workflowId: `cookbook-session-${sessionId}`,
  totalSteps: 4,
  firstStepId: 'fetch-forecast',
  selectedApis: {},
  idempotencyKey: null,
  startedAt: new Date(),
});
await appendSessionEvents(redis, prefix, sessionId, [{ seq: 1, name: 'session.started', data: { sessionId } }]);
await app.listen({ host: '127.0.0.1', port: 0 });
const port = (app.server.address() as AddressInfo).port;

const countConnections = async () => ((await redis.client('LIST')) as string).split('\n').filter((line) => line.includes(`name=${prefix}:sse-hub`)).length;
const memoryMb = () => Math.round(process.memoryUsage().rss / 1e6);

const t0 = Date.now();
let received = 0;
let ended = 0;
const closers: (() => void)[] = [];
await Promise.all(
  Array.from(
    { length: STREAMS },
    () =>
      new Promise<void>((resolve, reject) => {
        const req = request({ host: '127.0.0.1', port, path: `/api/v1/cookbooks/sessions/${sessionId}/events`, headers: { authorization: `Bearer ${fullKey}` } }, (res) => {
          if (res.statusCode !== 200) reject(new Error(`status ${res.statusCode}`));
          res.setEncoding('utf8');
          res.on('data', (chunk: string) => {
            received += (chunk.match(/^event: /gm) ?? []).length;
          });
          res.on('end', () => (ended += 1));
          resolve();
        });
        req.on('error', reject);
        req.end();
        closers.push(() => req.destroy());
      }),
  ),
);
const waitUntil = async (what: string, check: () => boolean, timeoutMs = 30_000) => {
  const start = Date.now();
  while (!check()) {
    if (Date.now() - start > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
};
await waitUntil('replay', () => received >= STREAMS);
console.log(`${STREAMS} streams open and replayed in ${Date.now() - t0} ms; hub ${JSON.stringify(app.sessionEvents.stats())}; subscriber connections in Redis: ${await countConnections()}; rss ${memoryMb()} MB`);

const t1 = Date.now();
await appendSessionEvents(redis, prefix, sessionId, [{ seq: 2, name: 'step.started', data: { sessionId, stepId: 'fetch-forecast' } }]);
await waitUntil('live event', () => received >= 2 * STREAMS);
console.log(`one live event reached all ${STREAMS} streams in ${Date.now() - t1} ms`);

for (const close of closers.slice(0, STREAMS / 2)) close();
await waitUntil('half closed', () => app.sessionEvents.stats().followers === STREAMS - STREAMS / 2);
console.log(`closed half the clients: hub ${JSON.stringify(app.sessionEvents.stats())}`);

const t2 = Date.now();
await appendSessionEvents(redis, prefix, sessionId, [{ seq: 3, name: 'session.cancelled', data: { sessionId } }]);
await waitUntil('final event ends the rest', () => ended >= STREAMS / 2);
console.log(`final event ended the other ${STREAMS / 2} streams in ${Date.now() - t2} ms; hub ${JSON.stringify(app.sessionEvents.stats())}`);

await app.close();
await sql`delete from accounts where id = ${account.id}`.catch(() => {});
process.exit(0);
