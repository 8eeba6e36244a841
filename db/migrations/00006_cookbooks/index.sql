-- Cookbooks (loaded from db/seed/cookbooks/*.json) and the Postgres mirror of cookbook sessions.
-- The Temporal workflow `cookbook-session-<id>` is the source of truth for a session; the rows below
-- are written by its activities (and by the edge right after the workflow started) so that session
-- lists, the human-step inbox and ownership checks are plain SQL.

create table cookbooks (
  id           text primary key check (id ~ '^[a-z0-9][a-z0-9-]{0,99}$'),
  title        text not null,
  description  text not null,
  category     text not null,
  -- [{ name, description, category, required, suggestedProviders? }]
  slots        jsonb not null,
  -- [{ stepId, title, kind, instructions, inputSchema, timeLimits }]
  steps        jsonb not null,
  search       tsvector generated always as (
                 setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
                 setweight(to_tsvector('english', coalesce(description, '')), 'B') ||
                 setweight(to_tsvector('english', coalesce(category, '')), 'C')) stored,
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now()
);
create index cookbooks_category_idx on cookbooks (lower(category));
create index cookbooks_search_idx on cookbooks using gin (search);

create table cookbook_sessions (
  id               text primary key,
  account_id       uuid not null references accounts (id) on delete cascade,
  cookbook_id      text not null references cookbooks (id),
  workflow_id      text not null unique,
  status           text not null check (status in ('running', 'waiting_for_human', 'completed', 'failed', 'cancelled', 'expired')),
  current_step_id  text,
  completed_steps  integer not null default 0 check (completed_steps >= 0),
  total_steps      integer not null check (total_steps > 0),
  -- { slotName: apiId }
  selected_apis    jsonb not null,
  -- Start requests carrying the same Idempotency-Key (per account) answer this same session.
  idempotency_key  text,
  -- Sequence number of the workflow transition this row reflects; older writes never overwrite newer.
  version          integer not null default 0,
  started_at       timestamptz not null,
  updated_at       timestamptz not null,
  ended_at         timestamptz
);
create unique index cookbook_sessions_idempotency_key on cookbook_sessions (account_id, idempotency_key)
  where idempotency_key is not null;
create index cookbook_sessions_active_idx on cookbook_sessions (account_id, started_at desc)
  where status in ('running', 'waiting_for_human');
create index cookbook_sessions_account_idx on cookbook_sessions (account_id, started_at desc);

-- Step history: one row per step that has started, kept by the workflow's activities.
create table cookbook_session_steps (
  session_id    text not null references cookbook_sessions (id) on delete cascade,
  step_id       text not null,
  position      integer not null,
  kind          text not null check (kind in ('agent', 'human')),
  status        text not null check (status in ('pending', 'completed', 'expired', 'cancelled')),
  result_data   jsonb,
  -- 'key' (an API or agent key) or 'human' (the dashboard's cookie session).
  completed_by  text check (completed_by in ('key', 'human')),
  started_at    timestamptz not null,
  remind_at     timestamptz,
  expires_at    timestamptz,
  reminders     integer not null default 0,
  completed_at  timestamptz,
  primary key (session_id, step_id)
);
create index cookbook_session_steps_pending_human_idx on cookbook_session_steps (session_id)
  where kind = 'human' and status = 'pending';
