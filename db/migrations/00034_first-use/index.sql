-- The dashboard's first-run checklist (issue 33): what the account's own records cannot tell. Whether a
-- call was made or funds were added is read from the ledger, whether a key was used from api_keys;
-- these are the moments that leave no other trace: the key (or a command holding it) copied from the
-- dashboard, the first search or discovery made with the account's credentials, and the checklist
-- dismissed by its owner; and when every item was first seen done, after which the checklist is never
-- worked out again. One row per account, made on the first of them.
create table account_first_use (
  account_id     uuid primary key references accounts (id) on delete cascade,
  key_copied_at  timestamptz,
  discovered_at  timestamptz,
  dismissed_at   timestamptz,
  completed_at   timestamptz
);

-- "Funds added" is an existence check per account; top-ups are few next to charges.
create index ledger_entries_topup_idx on ledger_entries (account_id) where kind = 'topup';
