-- Retention (packages/core/platform/retention.ts): old usage events, the step results and event
-- streams of long-ended sessions, and dead dashboard sessions are pruned by a repeatable job.
create index usage_events_at_idx on usage_events (at);
-- Ended sessions whose results and events were pruned carry the time it was done.
alter table cookbook_sessions add column pruned_at timestamptz;
create index cookbook_sessions_prunable_idx on cookbook_sessions (ended_at) where ended_at is not null and pruned_at is null;
