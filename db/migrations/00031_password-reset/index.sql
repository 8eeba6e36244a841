-- Account self-service (issue 33): password reset by e-mail and the signed-in sessions list.
-- A person has at most one live reset link: asking again replaces it. The token exists only as its
-- SHA-256 here and in the person's mailbox; setting a password (by reset or by change) clears it.
alter table people
  add column reset_token_hash  bytea,
  add column reset_expires_at  timestamptz;
create unique index people_reset_token_key on people (reset_token_hash) where reset_token_hash is not null;

-- The browser a session was opened from, as its User-Agent said (cut to 300 characters), so a person
-- can tell their sessions apart on the Settings page. Older sessions have none.
alter table dashboard_sessions add column user_agent text;
create index dashboard_sessions_person_idx on dashboard_sessions (person_id) where revoked_at is null;
