-- Live top-ups through Stripe Checkout (issue 16). A top-up is asked for by the account (a row here
-- and a Checkout Session at Stripe) and credited only by Stripe's webhook, with the amount the event
-- carries. Refunds and disputes take back what was credited: a `clawback` ledger entry, the one kind
-- of entry that may take a balance below zero.
create table topups (
  id                          text primary key,
  account_id                  uuid not null references accounts (id) on delete cascade,
  requested_micros            bigint not null check (requested_micros > 0),
  currency                    text not null,
  stripe_checkout_session_id  text unique,
  stripe_payment_intent_id    text unique,
  status                      text not null default 'pending' check (status in ('pending', 'completed', 'expired')),
  -- What Stripe's events said: credited from checkout.session.completed / async_payment_succeeded,
  -- refunded (cumulative, charge.refunded) and disputed (charge.dispute.created).
  credited_micros             bigint not null default 0,
  refunded_micros             bigint not null default 0,
  disputed_micros             bigint not null default 0,
  clawed_back_micros          bigint not null default 0,
  created_at                  timestamptz not null default now(),
  completed_at                timestamptz
);
create index topups_account_idx on topups (account_id, created_at desc);

-- Refunds and disputes that arrive before the payment's checkout event (Stripe does not promise
-- order): kept by payment intent until the top-up it belongs to is credited.
create table stripe_payment_adjustments (
  payment_intent_id  text primary key,
  refunded_micros    bigint not null default 0,
  disputed_micros    bigint not null default 0,
  updated_at         timestamptz not null default now()
);

-- Every Stripe event handled, by id: a redelivered event changes nothing.
create table stripe_events (
  id           text primary key,
  type         text not null,
  received_at  timestamptz not null default now()
);

alter table ledger_entries drop constraint ledger_entries_kind_check;
alter table ledger_entries add constraint ledger_entries_kind_check
  check (kind in ('signup_credit', 'topup', 'charge', 'refund', 'adjustment', 'clawback'));
alter table ledger_entries drop constraint ledger_entries_check;
alter table ledger_entries add constraint ledger_entries_sign_check
  check ((kind in ('charge', 'clawback')) = (amount_micros < 0) or amount_micros = 0);
-- Only a charge must leave the balance at or above zero; a credit to an account in debt may not.
alter table ledger_entries drop constraint ledger_entries_balance_after_micros_check;
alter table ledger_entries add constraint ledger_entries_charge_balance_check check (kind <> 'charge' or balance_after_micros >= 0);

-- A balance may be negative only while a clawback put it there (set by the clawback, cleared by the
-- credit that lifts it to zero or above). Charges still need balance >= cost.
alter table accounts add column clawback_debt boolean not null default false;
alter table accounts drop constraint accounts_balance_micros_check;
alter table accounts add constraint accounts_balance_micros_check check (balance_micros >= 0 or clawback_debt);
