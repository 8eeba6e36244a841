import { afterAll, describe, expect, it } from 'vitest';
import { markBalanceDepleted, markBalanceLow, setLowBalanceThreshold, settleBalanceAlertState } from '#db/balance-alerts';
import { charge, credit } from '#db/ledger';
import { createSql } from '#db/sql';
import { createTestAccount } from '../helpers/app.js';
import { testDatabaseUrl } from '../helpers/settings.js';

const sql = createSql(testDatabaseUrl(), { max: 4 });
afterAll(async () => sql.end());

const stateOf = async (accountId: string) =>
  (await sql<{ state: string }[]>`select balance_alert_state as state from accounts where id = ${accountId}`)[0]!.state;

describe('balance alert state', () => {
  it('is not marked depleted or low by a check that runs after a top-up has settled', async () => {
    // A refused call (price 10,000) seen at a balance of 5,000, then a top-up to 25,000 settled before the
    // asynchronous check of the refusal runs: the account stays armed, so its next crossing is announced.
    const account = await createTestAccount(sql, { balanceMicros: 5_000n });
    await setLowBalanceThreshold(sql, account.accountId, 20_000n);
    expect(await stateOf(account.accountId)).toBe('low');
    expect(await markBalanceDepleted(sql, account.accountId, 10_000n)).toBe(true);
    expect(await markBalanceDepleted(sql, account.accountId, 10_000n)).toBe(false);
    await credit(sql, { accountId: account.accountId, amountMicros: 20_000n, kind: 'topup', description: 'test top-up' });
    await settleBalanceAlertState(sql, account.accountId);
    expect(await stateOf(account.accountId)).toBe('ok');
    // The late check of a second refusal at the old balance.
    expect(await markBalanceDepleted(sql, account.accountId, 10_000n)).toBe(false);
    // Nor is a late check of a crossing from before the top-up taken as one.
    expect(await markBalanceLow(sql, account.accountId)).toBe(false);
    expect(await stateOf(account.accountId)).toBe('ok');
    // A real crossing still is.
    expect((await charge(sql, { accountId: account.accountId, costMicros: 10_000n, item: 'test' })).ok).toBe(true);
    expect(await markBalanceLow(sql, account.accountId)).toBe(true);
    expect(await stateOf(account.accountId)).toBe('low');
  });
});
