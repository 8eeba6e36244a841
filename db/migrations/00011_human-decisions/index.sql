-- Human-step decisions (issue 18): a session a person rejected ends `completed` with outcome
-- `rejected`; a human step keeps the decision and note; an agent step sent back to keeps the note.
alter table cookbook_sessions add column outcome text check (outcome in ('rejected'));
alter table cookbook_session_steps
  add column decision text check (decision in ('approve', 'reject', 'request_changes')),
  add column note text,
  add column feedback jsonb;
