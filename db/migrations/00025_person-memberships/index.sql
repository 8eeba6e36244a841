-- People and memberships (trust round 3, finding 7). A person is a login: one e-mail address, one
-- password. What a person may do is a membership: they own an account (accounts.owner_person_id)
-- and/or approve for others (account_members.person_id). An invitation is a membership that no person
-- holds yet; it reserves its address in the inviting account only, so nobody can squat an address
-- platform-wide, and one person signs in once and switches between the accounts they belong to.
create table people (
  id             text primary key,
  email          text not null,
  password_hash  text,
  created_at     timestamptz not null default now()
);
create unique index people_email_key on people (lower(email));

alter table accounts add column owner_person_id text references people (id);
create unique index accounts_owner_person_key on accounts (owner_person_id) where owner_person_id is not null;

alter table account_members add column person_id text references people (id);
create index account_members_person_idx on account_members (person_id) where removed_at is null;
-- An address was one live membership platform-wide (so an invitation locked the address out of every
-- other account and out of registration); now it is one live membership per account.
drop index account_members_live_email_key;
create unique index account_members_account_email_key on account_members (account_id, lower(email)) where removed_at is null;

-- The person who signed in; the session's account is the one they are currently working in.
alter table dashboard_sessions add column person_id text references people (id) on delete cascade;

-- Existing logins become people: owners with a password, then accepted approvers (until now an
-- address was never both, so the two sets do not overlap).
insert into people (id, email, password_hash, created_at)
select 'per_' || substr(md5(random()::text || a.id::text), 1, 16), a.email, a.password_hash, a.created_at
  from accounts a where a.password_hash is not null
on conflict (lower(email)) do nothing;
insert into people (id, email, password_hash, created_at)
select 'per_' || substr(md5(random()::text || m.id), 1, 16), m.email, m.password_hash, m.accepted_at
  from account_members m where m.removed_at is null and m.accepted_at is not null and m.password_hash is not null
on conflict (lower(email)) do nothing;
update accounts a set owner_person_id = p.id from people p where lower(p.email) = lower(a.email) and a.password_hash is not null;
update account_members m set person_id = p.id from people p
 where lower(p.email) = lower(m.email) and m.removed_at is null and m.accepted_at is not null;
update dashboard_sessions s set person_id = coalesce(
  (select m.person_id from account_members m where m.id = s.member_id),
  (select a.owner_person_id from accounts a where a.id = s.account_id and s.member_id is null));

-- Passwords live on people now.
update accounts set password_hash = null where owner_person_id is not null;
update account_members set password_hash = null where person_id is not null;
