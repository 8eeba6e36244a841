-- Approvers (issue 18): people an account invites by e-mail to see and complete its human steps,
-- and nothing else. A member signs in with their own password; their dashboard session names them.
create table account_members (
  id                 text primary key,
  account_id         uuid not null references accounts (id) on delete cascade,
  email              text not null,
  role               text not null default 'approver' check (role in ('approver')),
  password_hash      text,
  -- SHA-256 of the one-time invitation token the e-mail carries; cleared once it is accepted.
  invite_token_hash  bytea unique,
  invite_expires_at  timestamptz,
  invited_at         timestamptz not null default now(),
  accepted_at        timestamptz,
  removed_at         timestamptz
);
-- One live membership per e-mail address, whatever the letter case (sign-in looks people up by it).
create unique index account_members_live_email_key on account_members (lower(email)) where removed_at is null;
create index account_members_account_idx on account_members (account_id, invited_at);

alter table dashboard_sessions add column member_id text references account_members (id) on delete cascade;
create index dashboard_sessions_member_idx on dashboard_sessions (member_id) where member_id is not null;

-- Who completed a step, when an approver did.
alter table cookbook_session_steps add column completed_by_member_id text references account_members (id) on delete set null;

-- A human step assigned to one approver; no row means the first taker among the account's people.
create table human_step_assignments (
  session_id   text not null references cookbook_sessions (id) on delete cascade,
  step_id      text not null,
  member_id    text not null references account_members (id) on delete cascade,
  assigned_at  timestamptz not null default now(),
  primary key (session_id, step_id)
);
