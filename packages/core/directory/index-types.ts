// The shapes the in-process directory index is built from and answers with.
import type { PricingRule } from '#db/metered-apis';

export interface IndexedEndpoint {
  method: string;
  path: string;
  summary: string;
}

/** What every listing shows of an API: the summary columns of its `apis` row, with its vote tallies. */
export interface ApiSummaryRow {
  id: string;
  name: string;
  provider: string;
  service: string | null;
  categories: string[];
  /** At most 300 characters, as summaries show it. */
  description: string;
  price_micros: bigint;
  /** Per-path prices (the `pricing_rules` jsonb: method, path, priceMicros), as stored. */
  pricing_rules?: unknown;
  featured: boolean;
  votes_up: number;
  votes_down: number;
}

/** An API as the in-process index holds it: its summary plus what ranking and reasons need. */
export interface IndexedApi extends ApiSummaryRow {
  popularity: number;
  /** Its description says that only some developers may use it, or that it is withdrawn (index-loader.ts, `restrictedAccess`). */
  restricted: boolean;
  endpoints: IndexedEndpoint[];
  /** Its per-path price rules (`apis.pricing_rules`), for the price of each operation discovery names. */
  pricingRules: PricingRule[];
  /** Trigrams of the lower-cased name/provider/service, in order (pg_trgm word_similarity). */
  nameTrigrams: string[];
  /** Lower-cased words of each endpoint's summary and path, built on first use (discovery reasons). */
  endpointWords?: { words: string[]; endpoints: number[][] };
  /** Lower-cased name, provider, service, categories and description, built on first use (discovery reasons). */
  reasonText?: string;
  /** Number of lexemes of the (position-stripped) endpoint vector: ts_rank's length normalization. */
  endpointLexemes: number;
}

export interface HeadPostings {
  apis: number[];
  /** Each API's ts_rank contribution for this lexeme (depends only on the document). */
  contributions: number[];
}

export interface VocabularyWord {
  word: string;
  ndoc: number;
  /** The english lexeme, null for a stop word. */
  lexeme: string | null;
  trigrams: number;
}

export interface IndexTerm {
  group: number;
  lexeme: string | null;
  weight: number;
}

export interface RankRequest {
  /** Unique lexemes of every query term (ts_rank's query). */
  lexemes: string[];
  /** Per lexeme, its weight in the text rank (1 for the query's words, less for related words). */
  lexemeWeights?: number[];
  /** Lexemes that pick candidates. */
  selective: string[];
  /** Every term of every concept group with its IDF weight. */
  terms: IndexTerm[];
  /** Normalized query text compared to names. */
  raw: string;
  category?: string | undefined;
  /** Only these API ids (callable=true), or any. */
  only?: ReadonlySet<string> | undefined;
}

export interface IndexHit {
  api: IndexedApi;
  score: number;
  coverage: number;
}
