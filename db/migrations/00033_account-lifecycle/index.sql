-- Account self-service, second part (issue 33): e-mail verification, e-mail change, account deletion.

-- A person's address is verified once they open a link mailed to it (sign-up, a resent link, an
-- e-mail change, a password reset link, an approver's invitation: each proves the mailbox). One live
-- verification link and one pending address change per person; tokens exist only as SHA-256 here.
alter table people
  add column email_verified_at       timestamptz,
  add column verify_token_hash       bytea,
  add column verify_expires_at       timestamptz,
  add column pending_email           text,
  add column email_change_token_hash bytea,
  add column email_change_expires_at timestamptz;
create unique index people_verify_token_key on people (verify_token_hash) where verify_token_hash is not null;
create unique index people_email_change_token_key on people (email_change_token_hash) where email_change_token_hash is not null;

-- Logins from before verification existed are not asked again: they were created before the rule,
-- and approvers among them proved their address by opening the invitation.
update people set email_verified_at = created_at;

-- A deleted account keeps its row (and so its ledger, which references it) with the personal data
-- gone: the address is replaced by a placeholder, the owner unlinked. `deleted_at` marks it.
alter table accounts add column deleted_at timestamptz;

-- What was left on the balance when an account was deleted: written off by a ledger entry of its own.
alter table ledger_entries drop constraint ledger_entries_kind_check;
alter table ledger_entries add constraint ledger_entries_kind_check
  check (kind in ('signup_credit', 'topup', 'charge', 'refund', 'adjustment', 'clawback', 'x402_credit', 'forfeit'));
alter table ledger_entries drop constraint ledger_entries_sign_check;
alter table ledger_entries add constraint ledger_entries_sign_check
  check ((kind in ('charge', 'clawback', 'forfeit')) = (amount_micros < 0) or amount_micros = 0);
