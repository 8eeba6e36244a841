/**
 * Platform documentation: markdown sections with front matter kept in db/seed/docs, upserted into
 * Postgres by the seed CLI, listed, searched (weighted full text, ts_headline snippets) and read.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { parseDollars } from '#contracts/money';
import type { Db } from './sql.js';

const frontMatter = z.object({
  slug: z.string().regex(/^[a-z0-9][a-z0-9-]{0,99}$/),
  title: z.string().min(1),
  summary: z.string().default(''),
  price: z
    .string()
    .regex(/^\d+(\.\d{1,6})?$/)
    .default('0.005'),
  position: z.coerce.number().int().default(0),
});

export interface DocFile {
  slug: string;
  title: string;
  summary: string;
  priceMicros: bigint;
  position: number;
  content: string;
}

/** Parses "---\nkey: value\n---\nbody". Values may be quoted; nothing nested. */
export function parseDocFile(text: string, name = 'doc'): DocFile {
  const match = /^---\r?\n([\s\S]*?)\r?\n---\r?\n?([\s\S]*)$/.exec(text);
  if (!match) throw new Error(`${name}: missing front matter`);
  const fields: Record<string, string> = {};
  for (const line of match[1]!.split(/\r?\n/)) {
    const kv = /^([A-Za-z]+):\s*(.*)$/.exec(line.trim());
    if (kv) fields[kv[1]!] = kv[2]!.replace(/^(["'])(.*)\1$/, '$2');
  }
  const meta = frontMatter.parse(fields);
  return {
    slug: meta.slug,
    title: meta.title,
    summary: meta.summary,
    priceMicros: parseDollars(meta.price)!,
    position: meta.position,
    content: match[2]!.trim() + '\n',
  };
}

/** Upserts every *.md section of `dir`; returns how many were read. Idempotent. */
export async function loadDocs(db: Db, dir: string): Promise<number> {
  const files = (await readdir(dir)).filter((f) => f.endsWith('.md')).sort();
  for (const file of files) {
    const doc = parseDocFile(await readFile(join(dir, file), 'utf8'), file);
    await db`
      insert into docs (id, slug, title, summary, content, price_micros, position)
      values (${doc.slug}, ${doc.slug}, ${doc.title}, ${doc.summary}, ${doc.content}, ${doc.priceMicros}, ${doc.position})
      on conflict (slug) do update set title = excluded.title, summary = excluded.summary, content = excluded.content,
        price_micros = excluded.price_micros, position = excluded.position, updated_at = now()
      where (docs.title, docs.summary, docs.content, docs.price_micros, docs.position)
        is distinct from (excluded.title, excluded.summary, excluded.content, excluded.price_micros, excluded.position)`;
  }
  return files.length;
}

export interface DocListRow {
  id: string;
  slug: string;
  title: string;
  summary: string;
  price_micros: bigint;
}

export async function listDocs(db: Db): Promise<DocListRow[]> {
  return db<DocListRow[]>`select id, slug, title, summary, price_micros from docs order by position, slug`;
}

export interface DocRow extends DocListRow {
  content: string;
}

export async function getDoc(db: Db, slug: string): Promise<DocRow | null> {
  const [row] = await db<DocRow[]>`select id, slug, title, summary, price_micros, content from docs where slug = ${slug}`;
  return row ?? null;
}

/** Every section with its content, in reading order (llms-full.txt). */
export async function listDocsWithContent(db: Db): Promise<DocRow[]> {
  return db<DocRow[]>`select id, slug, title, summary, price_micros, content from docs order by position, slug`;
}

export interface DocHit {
  slug: string;
  title: string;
  snippet: string;
}

/**
 * Full-text search over title (A), summary (B) and content (C), words ANDed (websearch syntax);
 * when nothing matches all words, any word may match. Snippets mark hits with <mark>...</mark>.
 */
export async function searchDocs(db: Db, q: string, limit = 10): Promise<DocHit[]> {
  const strict = await db<DocHit[]>`
    with q as (select websearch_to_tsquery('english', ${q}) as query)
    select slug, title,
           ts_headline('english', content, q.query, 'StartSel=<mark>, StopSel=</mark>, MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "') as snippet
      from docs, q
     where search_vector @@ q.query
     order by ts_rank_cd(search_vector, q.query, 1) desc, position
     limit ${limit}`;
  if (strict.length > 0) return strict;
  return db<DocHit[]>`
    with q as (
      select to_tsquery('english', string_agg(quote_literal(lexeme), ' | ')) as query
        from unnest(to_tsvector('english', ${q})) as t
    )
    select slug, title,
           ts_headline('english', content, q.query, 'StartSel=<mark>, StopSel=</mark>, MaxWords=30, MinWords=12, MaxFragments=2, FragmentDelimiter=" … "') as snippet
      from docs, q
     where q.query is not null and search_vector @@ q.query
     order by ts_rank_cd(search_vector, q.query, 1) desc, position
     limit ${limit}`;
}
