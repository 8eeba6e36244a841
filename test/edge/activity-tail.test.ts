import { randomUUID } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { ActivityTail } from '#core/billing';
import { createSql } from '#db/sql';
import { createTestAccount } from '../helpers/app.js';
import { testDatabaseUrl } from '../helpers/settings.js';

const sql = createSql(testDatabaseUrl(), { max: 4 });
afterAll(async () => sql.end());

/** Writes usage events as the usage worker does, with the write time given (a batch that commits late keeps its earlier one). */
async function write(accountId: string, count: number, recordedAt: Date = new Date()): Promise<string[]> {
  const ids = Array.from({ length: count }, () => randomUUID());
  await sql`
    insert into usage_events (id, account_id, api_id, item, status, latency_ms, cost_micros, at, method, path, outcome, recorded_at)
    select id, ${accountId}, 'tail.example', 'GET /x', 200, 3, 1000, ${recordedAt}, 'GET', '/x', 'served', ${recordedAt}
      from unnest(${ids}::uuid[]) as t(id)`;
  return ids;
}

describe('the live tail of the activity (ActivityTail)', () => {
  it('sends each call once and reads each row once while nothing commits late', async () => {
    const account = await createTestAccount(sql);
    await write(account.accountId, 30, new Date(Date.now() - 2_000));
    const tail = new ActivityTail(sql, account.accountId, {});
    await tail.prime();
    const primed = tail.rowsRead;
    expect(primed).toBe(30);

    const seen: string[] = [];
    for (let round = 0; round < 5; round += 1) {
      const ids = await write(account.accountId, 40);
      const sent = (await tail.poll()).map((entry) => entry.id);
      expect(new Set(sent)).toEqual(new Set(ids));
      seen.push(...sent);
    }
    expect(new Set(seen).size).toBe(200);
    // Every row read once: the 30 of the prime and the 200 since, however many polls saw the window.
    expect(tail.rowsRead).toBe(primed + 200);
    // A quiet poll reads no row.
    expect(await tail.poll()).toEqual([]);
    expect(tail.rowsRead).toBe(primed + 200);
  });

  it('sends a batch that committed late, with a write time before calls already sent, once', async () => {
    const account = await createTestAccount(sql);
    const tail = new ActivityTail(sql, account.accountId, {});
    await tail.prime();
    const early = new Date(Date.now() - 3_000);
    const onTime = await write(account.accountId, 10);
    expect((await tail.poll()).map((entry) => entry.id).sort()).toEqual([...onTime].sort());
    // Written now, but stamped 3 s ago: before the rows just sent, inside the look-back window.
    const late = await write(account.accountId, 5, early);
    const newer = await write(account.accountId, 2);
    expect((await tail.poll()).map((entry) => entry.id).sort()).toEqual([...late, ...newer].sort());
    expect(await tail.poll()).toEqual([]);
  });

  it('goes through a backlog larger than one poll reads, in order, each call once', async () => {
    const account = await createTestAccount(sql);
    const tail = new ActivityTail(sql, account.accountId, {});
    await tail.prime();
    // Five pages of 200 a poll: 2,300 calls take three polls.
    const ids = new Set<string>();
    for (let i = 0; i < 23; i += 1) for (const id of await write(account.accountId, 100, new Date(Date.now() + i))) ids.add(id);
    const sent: string[] = [];
    for (let poll = 0; poll < 4; poll += 1) sent.push(...(await tail.poll()).map((entry) => entry.id));
    expect(sent.length).toBe(2_300);
    expect(new Set(sent)).toEqual(ids);
  });

  it('sends only what matches its filter, and still reads each row once', async () => {
    const account = await createTestAccount(sql);
    const tail = new ActivityTail(sql, account.accountId, { statusMin: 500, statusMax: 599 });
    await tail.prime();
    await write(account.accountId, 10);
    const [failed] = await write(account.accountId, 1);
    await sql`update usage_events set status = 502, outcome = 'failed' where id = ${failed!}`;
    expect((await tail.poll()).map((entry) => entry.id)).toEqual([failed]);
    expect(await tail.poll()).toEqual([]);
    expect(tail.rowsRead).toBe(11);
  });
});
