-- Discovery's feedback signal (issue 35, docs/decisions/discovery-feedback.md): which APIs a
-- discovery listed to an account, so that a call the account made to one of them soon after counts
-- for that API. Only the listed ids are kept, not the task's text; rows older than the signal's
-- window are deleted by the retention job.
create table discovery_listings (
  account_id  uuid not null references accounts (id) on delete cascade,
  at          timestamptz not null default now(),
  api_ids     text[] not null
);
create index discovery_listings_at_idx on discovery_listings (at);
