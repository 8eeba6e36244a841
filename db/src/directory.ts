/**
 * The directory's read side: browse, relevance search, categories and natural-language discovery.
 *
 * Ranking (search and discovery share it): a weighted full-text rank over name/provider/service (A),
 * categories (B) and description (C); a separate, length-normalized rank over endpoint summaries
 * and path words; the share of the query's concepts the API covers; trigram similarity of the query
 * to the API's name (typos in names); and, as small tie-breakers, curated popularity, the featured
 * flag and votes. Terms that are not words of the catalog are corrected to the closest catalog
 * word by trigram similarity (kept alongside the original). Discovery also drops filler words and
 * adds capability terms from the task vocabulary ("text message" -> sms).
 */
import { PlatformError } from './errors.js';
import { DISCOVERY_STOPWORDS, expandCapabilities } from './discovery-vocabulary.js';
import type { AuthScheme } from './directory-text.js';
import type { Db } from './sql.js';

export const UNCATEGORIZED = 'uncategorized';
export const MAX_QUERY_LENGTH = 500;
const MAX_TERMS = 24;

export interface ApiSummaryRow {
  id: string;
  name: string;
  provider: string;
  service: string | null;
  categories: string[];
  description: string;
  price_micros: bigint;
  featured: boolean;
  votes_up: number;
  votes_down: number;
}

export interface ApiDetailRow extends ApiSummaryRow {
  version: string | null;
  base_url: string;
  auth_scheme: AuthScheme;
  endpoints: { method: string; path: string; summary: string }[];
  endpoint_count: number;
  byok_price_micros: bigint | null;
  has_platform_key: boolean;
  source: string;
  instructions: string | null;
}

/** Opaque paging cursor: base64url of {"o": offset}. The catalog changes rarely; offsets are stable enough. */
export function encodeCursor(offset: number): string {
  return Buffer.from(JSON.stringify({ o: offset })).toString('base64url');
}

export function decodeCursor(cursor: string | undefined): number {
  if (!cursor) return 0;
  try {
    const value = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as { o?: unknown };
    if (typeof value.o === 'number' && Number.isInteger(value.o) && value.o >= 0 && value.o <= 1_000_000) return value.o;
  } catch {
    // fall through
  }
  throw new PlatformError('validation_failed', 'cursor is not valid', { hint: 'Pass the nextCursor of a previous page unchanged, or omit it.' });
}

const SUMMARY_COLUMNS = (db: Db) => db`
  a.id, a.name, a.provider, a.service, a.categories, left(a.description, 300) as description, a.price_micros, a.featured,
  coalesce(v.up, 0)::int as votes_up, coalesce(v.down, 0)::int as votes_down`;

const VOTES_JOIN = (db: Db) => db`
  left join lateral (
    select count(*) filter (where value = 1) as up, count(*) filter (where value = -1) as down
      from votes where target_type = 'api' and target_id = a.id
  ) v on true`;

/** Lower-case, accents removed, words only. */
export function normalizeQuery(q: string): string {
  return q
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, ' ')
    .trim();
}

export interface QueryPlan {
  /** The words searched (after dropping filler words in discovery). */
  words: string[];
  /** Spelling corrections applied: word -> catalog word. */
  corrections: Record<string, string>;
  /** Capability terms added from the vocabulary (discovery). */
  expansions: string[];
  /** Concept groups, each a to_tsquery OR-expression; coverage counts the groups an API matches. */
  groups: string[];
  /** Every term of every group (parallel arrays): its group index, text and IDF weight. */
  termGroups: number[];
  terms: string[];
  weights: number[];
  /** All terms, one to_tsquery OR-expression. */
  any: string;
  /** The terms that pick candidates (see planQuery). */
  selective: string;
  /** The normalized text compared to names by trigram similarity. */
  raw: string;
}

/** Validates a free-text query: not empty, not only punctuation, not longer than MAX_QUERY_LENGTH. */
export function checkQueryText(q: string, param = 'q'): string {
  if (q.length > MAX_QUERY_LENGTH) {
    throw new PlatformError('validation_failed', `${param} is too long (${q.length} characters; at most ${MAX_QUERY_LENGTH})`, {
      hint: 'Describe the task in a sentence or two; long texts do not search better.',
    });
  }
  const normalized = normalizeQuery(q);
  if (!normalized) {
    throw new PlatformError('validation_failed', q.trim() ? `${param} has no words to search for` : `${param} is required`, {
      hint: `Pass ${param} with a few words, e.g. ?${param}=send+a+text+message.`,
    });
  }
  return normalized;
}

async function planQuery(db: Db, normalized: string, discovery: boolean): Promise<QueryPlan> {
  let words = [...new Set(normalized.split(' ').filter(Boolean))];
  if (discovery) {
    const content = words.filter((w) => !DISCOVERY_STOPWORDS.has(w));
    if (content.length) words = content;
  }
  words = words.slice(0, MAX_TERMS);
  const expansions = discovery ? expandCapabilities(normalized).filter((t) => !words.includes(t)) : [];
  // Spelling: a word the catalog never uses gets the closest catalog word, kept beside the original.
  // The same look-up gives each word's document frequency, for IDF weights of the concept groups.
  const corrections: Record<string, string> = {};
  const docFreq = new Map<string, number>();
  const lookups = [...new Set([...words, ...expansions])].filter((w) => /^[a-z]+$/.test(w));
  let totalApis = 1;
  if (lookups.length) {
    const rows = await db<{ word: string; ndoc: number | null; best: string | null; best_ndoc: number | null; total: number }[]>`
      select t.word, d.ndoc, b.word as best, b.ndoc as best_ndoc,
             (select count(*)::int from apis) as total
        from unnest(${lookups}::text[]) as t(word)
        left join directory_words d on d.word = t.word
        left join lateral (
          select w.word, w.ndoc from directory_words w
           where d.word is null and length(t.word) >= 4 and w.word % t.word and similarity(w.word, t.word) >= 0.45
           order by similarity(w.word, t.word) desc, w.ndoc desc limit 1) b on true`;
    for (const row of rows) {
      totalApis = Math.max(totalApis, row.total);
      if (row.ndoc !== null) docFreq.set(row.word, row.ndoc);
      if (row.ndoc === null && row.best && words.includes(row.word)) {
        corrections[row.word] = row.best;
        docFreq.set(row.best, row.best_ndoc ?? 1);
      }
    }
  }
  const idf = (term: string) => Math.log(1 + totalApis / (1 + (docFreq.get(term) ?? 0)));
  const expansionsFor = (word: string) => (discovery ? expandCapabilities(word) : []);
  const groups = words.map((w) => [...new Set([w, ...(corrections[w] ? [corrections[w]] : []), ...expansionsFor(w)])].join(' | '));
  // Phrase expansions ("text message" -> sms) form one more concept group of their own.
  const phraseTerms = expansions.filter((t) => !groups.some((g) => g.split(' | ').includes(t)));
  if (phraseTerms.length) groups.push(phraseTerms.join(' | '));
  const all = [...new Set([...words, ...Object.values(corrections), ...expansions])];
  // Each term weighs its IDF ("sentiment" says more than "analyze"); a concept group counts with
  // the weight of its best matched term, relative to its best possible one.
  const terms = groups.flatMap((g, index) => g.split(' | ').map((term) => ({ group: index, term, weight: idf(term) })));
  return {
    words,
    corrections,
    expansions,
    groups,
    termGroups: terms.map((t) => t.group),
    terms: terms.map((t) => t.term),
    weights: terms.map((t) => t.weight),
    any: all.join(' | '),
    // Candidates come from the selective terms only (a word in most APIs, like "add", would pull in
    // hundreds of rows to score); common terms still count in the score of every candidate.
    selective: (all.filter((t) => (docFreq.get(t) ?? 0) <= totalApis * 0.06).join(' | ') || all.join(' | ')),
    raw: words.join(' '),
  };
}

export interface RankedRow extends ApiSummaryRow {
  score: number;
  coverage: number;
}

interface RankOptions {
  category?: string | undefined;
  limit: number;
  offset: number;
}

/** Ranks APIs for a plan; see the module comment for the formula. */
async function rank(db: Db, plan: QueryPlan, options: RankOptions): Promise<RankedRow[]> {
  const categoryFilter = categoryCondition(db, options.category);
  return db<RankedRow[]>`
    with q as (select to_tsquery('english', ${plan.any}) as query),
    sq as (select to_tsquery('english', ${plan.selective}) as query),
    terms as (select gi, to_tsquery('english', t) as tq, w from unnest(${plan.termGroups}::int[], ${plan.terms}::text[], ${plan.weights}::float8[]) as x(gi, t, w)
               where numnode(to_tsquery('english', t)) > 0),
    total as (select greatest(sum(m), 0.001) as w from (select max(w) as m from terms group by gi) g),
    -- Candidates come from the three indexes separately (one OR across them makes the planner scan).
    candidates as (
      select id from apis, sq where search_vector @@ sq.query
      union select id from apis, sq where endpoint_vector @@ sq.query
      union select id from apis where ${plan.raw} <% search_name
    ),
    -- Materialized and narrow: every feature is computed once per candidate.
    matched as materialized (
      select a.id, a.name, a.provider, a.service, a.categories, a.description, a.price_micros, a.featured, a.popularity,
             ts_rank(a.search_vector, q.query, 0) as text_rank,
             ts_rank(a.endpoint_vector, q.query, 1) as endpoint_rank,
             coalesce((select sum(m) from (select max(w) as m from terms where a.search_vector @@ terms.tq or a.endpoint_vector @@ terms.tq group by gi) g), 0) / total.w as coverage,
             coalesce((select sum(m) from (select max(w) as m from terms where a.search_vector @@ terms.tq group by gi) g), 0) / total.w as head_coverage,
             word_similarity(${plan.raw}, a.search_name) as name_similarity
        from candidates c
        join apis a on a.id = c.id
        cross join q cross join total
       where true ${categoryFilter}
    )
    select ${SUMMARY_COLUMNS(db)},
           (a.relevance + least(coalesce(v.up, 0) - coalesce(v.down, 0), 10) * 0.005)::float8 as score,
           a.coverage::float8 as coverage
      from (
        select m.*,
               least(m.text_rank, 1.0) * 1.0
               + least(m.endpoint_rank * 20, 1.0) * 0.6
               + m.coverage * 1.5 + m.head_coverage * 0.5
               + case when m.name_similarity >= 0.6 then m.name_similarity * 0.8 else 0 end
               + m.popularity * 0.15 + case when m.featured then 0.05 else 0 end as relevance
          from matched m
      ) a
      ${VOTES_JOIN(db)}
     order by score desc, a.id
     limit ${options.limit} offset ${options.offset}`;
}

function categoryCondition(db: Db, category: string | undefined) {
  if (!category) return db``;
  return category === UNCATEGORIZED ? db`and cardinality(a.categories) = 0` : db`and ${category} = any(a.categories)`;
}

export interface ListOptions {
  q?: string | undefined;
  category?: string | undefined;
  limit: number;
  cursor?: string | undefined;
}

export interface ApiPage {
  apis: ApiSummaryRow[];
  nextCursor: string | null;
  plan: QueryPlan | null;
}

/** Browse (featured first, then by name) or search (by relevance), optionally within a category. */
export async function listApis(db: Db, options: ListOptions): Promise<ApiPage> {
  const offset = decodeCursor(options.cursor);
  if (options.q !== undefined) {
    const normalized = checkQueryText(options.q);
    const plan = await planQuery(db, normalized, false);
    const rows = await rank(db, plan, { category: options.category, limit: options.limit + 1, offset });
    const page = rows.slice(0, options.limit);
    return { apis: page, nextCursor: rows.length > options.limit ? encodeCursor(offset + options.limit) : null, plan };
  }
  const rows = await db<ApiSummaryRow[]>`
    select ${SUMMARY_COLUMNS(db)}
      from apis a
      ${VOTES_JOIN(db)}
     where true ${categoryCondition(db, options.category)}
     order by a.featured desc, lower(a.name), a.id
     limit ${options.limit + 1} offset ${offset}`;
  return { apis: rows.slice(0, options.limit), nextCursor: rows.length > options.limit ? encodeCursor(offset + options.limit) : null, plan: null };
}

export async function getApi(db: Db, id: string): Promise<ApiDetailRow | null> {
  const [row] = await db<ApiDetailRow[]>`
    select a.id, a.name, a.provider, a.service, a.categories, a.description, a.price_micros, a.featured,
           coalesce(v.up, 0)::int as votes_up, coalesce(v.down, 0)::int as votes_down,
           a.version, a.base_url, a.auth_scheme, a.endpoints, a.endpoint_count, a.byok_price_micros,
           a.platform_key_encrypted is not null as has_platform_key, a.source, a.instructions
      from apis a
      ${VOTES_JOIN(db)}
     where a.id = ${id}`;
  return row ?? null;
}

export async function apiExists(db: Db, id: string): Promise<boolean> {
  const [row] = await db`select 1 from apis where id = ${id}`;
  return row !== undefined;
}

export interface CategoryRow {
  id: string;
  api_count: number;
}

/**
 * Every category with its API count; APIs the source leaves uncategorized count under
 * "uncategorized". `source` limits the count to imported or operator rows.
 */
export async function listCategories(db: Db, source?: 'apis.guru' | 'operator'): Promise<CategoryRow[]> {
  return db<CategoryRow[]>`
    select category as id, count(*)::int as api_count
      from (select unnest(case when cardinality(categories) = 0 then array[${UNCATEGORIZED}] else categories end) as category
              from apis where ${source ?? null}::text is null or source = ${source ?? null}) c
     group by category
     order by api_count desc, category`;
}

export async function categoryExists(db: Db, category: string): Promise<boolean> {
  const [row] = await db`
    select 1 from apis a where true ${categoryCondition(db, category)} limit 1`;
  return row !== undefined;
}

/** "machine_learning" -> "Machine learning". */
export const categoryName = (id: string) => (id.charAt(0).toUpperCase() + id.slice(1)).replace(/_/g, ' ');

export interface DiscoveryResult {
  api: ApiSummaryRow;
  score: number;
  reason: string;
}

export interface Discovery {
  results: DiscoveryResult[];
  plan: QueryPlan;
}

/** Natural-language discovery: the APIs that can do the task, best first, each with a reason. */
export async function discover(db: Db, q: string, limit = 10): Promise<Discovery> {
  const normalized = checkQueryText(q, 'q');
  const plan = await planQuery(db, normalized, true);
  const rows = await rank(db, plan, { limit, offset: 0 });
  if (rows.length === 0) return { results: [], plan };
  // Endpoints that name the most query terms (word-prefix match, which covers word forms cheaply).
  const stems = [...new Set([...plan.words, ...Object.values(plan.corrections), ...plan.expansions])]
    .filter((t) => t.length >= 3 && !DISCOVERY_STOPWORDS.has(t))
    .map((t) => (t.length > 5 ? t.slice(0, t.length - 2) : t));
  const pattern = stems.length ? `\\m(${stems.join('|')})` : '^$';
  const endpointRows = await db<{ id: string; endpoints: { method: string; path: string; summary: string }[] }[]>`
    select a.id,
           coalesce((select jsonb_agg(m.e order by m.hits desc, m.ord) from (
               select e, ord, regexp_count(lower(concat_ws(' ', e->>'summary', e->>'path')), ${pattern}) as hits
                 from jsonb_array_elements(a.endpoints) with ordinality as x(e, ord)
                where lower(concat_ws(' ', e->>'summary', e->>'path')) ~ ${pattern}
                order by hits desc, ord limit 3) m), '[]'::jsonb) as endpoints
      from apis a
     where a.id = any(${rows.map((r) => r.id)})`;
  const matchedEndpoints = new Map(endpointRows.map((r) => [r.id, r.endpoints]));
  const matchedTerms = [...plan.words, ...Object.values(plan.corrections), ...plan.expansions];
  const results = rows.map((row) => {
    const endpoints = matchedEndpoints.get(row.id) ?? [];
    const parts: string[] = [];
    const hay = `${row.name} ${row.provider} ${row.service ?? ''} ${row.categories.join(' ')} ${row.description}`.toLowerCase();
    const inDescription = matchedTerms.filter((t) => hay.includes(t)).slice(0, 6);
    if (inDescription.length) parts.push(`matches ${inDescription.map((t) => `"${t}"`).join(', ')} in its name, categories or description`);
    if (endpoints.length) parts.push(`endpoints: ${endpoints.map((e) => `${e.method} ${e.path}${e.summary ? ` (${e.summary.slice(0, 80)})` : ''}`).join('; ')}`);
    if (parts.length === 0) parts.push('name resembles the query');
    return { api: row, score: Math.round(row.score * 1000) / 1000, reason: parts.join('; ') };
  });
  return { results, plan };
}
