-- Which account events also go to the owner's e-mail (issue 16), beside webhooks. Human steps and a
-- failed automatic top-up are always e-mailed; these are the rest.
alter table accounts add column email_event_types text[] not null default '{balance.low,balance.depleted}';
