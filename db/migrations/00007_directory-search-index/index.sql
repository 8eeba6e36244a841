-- Directory search runs in each edge instance's memory (db/src/directory-index.ts). Every write to
-- the catalog or to votes notifies the instances, whichever process made it (importer, operator
-- CLI, proxy registration, vote routes): one notification per statement, delivered at commit
-- (identical ones within a transaction are folded into one).
create or replace function directory_notify_change() returns trigger language plpgsql as $$
begin
  perform pg_notify('directory_changed', tg_argv[0]);
  return null;
end $$;

create trigger apis_directory_changed
  after insert or update or delete or truncate on apis
  for each statement execute function directory_notify_change('apis');

create trigger votes_directory_changed
  after insert or update or delete or truncate on votes
  for each statement execute function directory_notify_change('votes');
