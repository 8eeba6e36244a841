-- Which key started a cookbook session. An agent key sees, completes and cancels only the sessions
-- it started (docs/decisions/agent-keys-see-their-own-sessions.md); the account's API keys and its
-- dashboard see them all. Null: started from the dashboard, or before this column existed (such
-- sessions stay with the account's API keys and dashboard). A deleted key's sessions keep running.
alter table cookbook_sessions add column started_by_key_id text references api_keys (id) on delete set null;
create index cookbook_sessions_started_by_key_idx on cookbook_sessions (started_by_key_id, started_at desc) where started_by_key_id is not null;
