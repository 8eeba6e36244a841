-- x402 per-call payments (issue 16). A payment is claimed by the hash of its PAYMENT-SIGNATURE payload
-- before it is verified, so the same payload cannot pay twice; once settled, the ledger gets an
-- `x402_credit` and the call's `charge` in one transaction (the balance does not move).
create table x402_payments (
  payload_hash   bytea primary key,
  account_id     uuid not null references accounts (id) on delete cascade,
  amount_micros  bigint not null,
  status         text not null default 'verifying' check (status in ('verifying', 'verified', 'settled', 'invalid', 'not_settled', 'settle_failed')),
  reason         text,
  payer          text,
  transaction    text,
  network        text,
  charge_id      uuid references ledger_entries (id),
  created_at     timestamptz not null default now(),
  updated_at     timestamptz not null default now()
);
create index x402_payments_account_idx on x402_payments (account_id, created_at desc);

alter table ledger_entries drop constraint ledger_entries_kind_check;
alter table ledger_entries add constraint ledger_entries_kind_check
  check (kind in ('signup_credit', 'topup', 'charge', 'refund', 'adjustment', 'clawback', 'x402_credit'));
