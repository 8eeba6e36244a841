-- Fixes from the review of the payment paths (2026-11-25):
-- a live top-up remembers the caller's Idempotency-Key and its Checkout page, so a retried request
-- answers the same page; an x402 payment settled at the facilitator whose ledger write failed is
-- kept as such (for an operator to record), never lost.
alter table topups add column idempotency_key text, add column checkout_url text;
create unique index topups_idempotency_key on topups (account_id, idempotency_key) where idempotency_key is not null;

alter table x402_payments drop constraint x402_payments_status_check;
alter table x402_payments add constraint x402_payments_status_check
  check (status in ('verifying', 'verified', 'settled', 'invalid', 'not_settled', 'settle_failed', 'settled_unrecorded'));
