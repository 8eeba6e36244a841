-- Auto top-up (issue 16): "when the balance falls below X, add Y" with a payment method saved through
-- Stripe Checkout in setup mode, charged off-session by a queue job (never from the request path).
-- At most one attempt in flight per account; a failed attempt backs off.
alter table accounts
  add column stripe_customer_id           text unique,
  add column auto_topup_enabled           boolean not null default false,
  add column auto_topup_threshold_micros  bigint check (auto_topup_threshold_micros > 0),
  add column auto_topup_amount_micros     bigint check (auto_topup_amount_micros > 0),
  add column auto_topup_payment_method    text,
  add column auto_topup_in_flight_since   timestamptz,
  add column auto_topup_failures          integer not null default 0,
  add column auto_topup_retry_after       timestamptz,
  add column auto_topup_last_error        text;

alter table topups add column kind text not null default 'checkout' check (kind in ('checkout', 'auto'));
alter table topups drop constraint topups_status_check;
alter table topups add constraint topups_status_check check (status in ('pending', 'completed', 'expired', 'failed'));
