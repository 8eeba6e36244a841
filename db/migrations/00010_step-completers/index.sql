-- Who completed each step: the key that sent the completion, or the person signed in to the
-- dashboard. Written by the edge once the workflow has applied the completion (the workflow itself
-- only knows 'key' or 'human').
alter table cookbook_session_steps
  add column completed_by_key_id text,
  add column completed_by_person_id uuid;
-- The session history lists (GET /cookbooks/sessions?status=ended|all) page by start time.
create index cookbook_sessions_account_status_idx on cookbook_sessions (account_id, status, started_at desc);
