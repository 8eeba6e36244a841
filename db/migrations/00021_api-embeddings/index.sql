-- Dense retrieval for discovery (docs/DISCOVERY.md): one sentence embedding per API, computed by the
-- importer (packages/core/directory/semantic.ts) from the API's name, description, categories and
-- first endpoint summaries. text_hash identifies the model and the exact text embedded, so a changed
-- description or another model is re-embedded and everything else is left alone.
create table api_embeddings (
  api_id      text primary key references apis (id) on delete cascade,
  model       text not null,
  text_hash   text not null,
  -- float32 little-endian, unit length (dimensions = octet_length / 4).
  vector      bytea not null check (octet_length(vector) > 0 and octet_length(vector) % 4 = 0),
  updated_at  timestamptz not null default now()
);

-- Edge instances reload their in-process index when embeddings change, as for the catalog (00007).
create trigger api_embeddings_directory_changed
  after insert or update or delete or truncate on api_embeddings
  for each statement execute function directory_notify_change('apis');
