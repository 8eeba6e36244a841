-- Balance alerts (issue 16): the threshold an account sets for `balance.low`, and where its balance
-- stands against it, so each crossing is announced once ('low' after the announcement, 'depleted'
-- after a call was refused or the balance reached zero, back to 'ok' when a credit lifts it).
alter table accounts
  add column low_balance_threshold_micros bigint check (low_balance_threshold_micros > 0),
  add column balance_alert_state text not null default 'ok' check (balance_alert_state in ('ok', 'low', 'depleted'));
