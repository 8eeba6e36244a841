import {
  activityRecordedAfter,
  countActivityRecordedBetween,
  listActivity,
  statementEntries,
  statementTotals,
  type ActivityFilter,
  type ActivityOutcome,
  type ActivityPosition,
  type ActivityRow,
  type StatementPeriod,
  type StatementRow,
} from '#db/activity';
import type { Db, Sql } from '#db/sql';
import { recordUsageEvents, type UsageEvent } from '#db/usage';
import { formatDollars, toDollars } from '#contracts/money';
import { PlatformError } from '#core/platform';

/**
 * What an account sees of its calls and its money (docs/decisions/activity-and-statement.md):
 * - the activity log, one entry per metered call (served, failed or refunded), from the usage events;
 * - the statement, every ledger movement with the balance after it, whose total over all time is the
 *   balance.
 */

// ---------------------------------------------------------------------------------------------------
// Paths: what is kept of a proxied request's path

/** The longest path kept; longer ones are cut (and marked with "…"). */
const MAX_PATH = 256;
/** A segment this long or longer made only of token characters, with letters and digits, reads as a credential or an opaque token. */
const OPAQUE_SEGMENT = /^[A-Za-z0-9_\-.~+=%:]{24,}$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** Well-known secret prefixes: masked whatever their length. */
const SECRET_PREFIX = /^(?:sk|rk|pk|ghp|gho|ghs|github_pat|xox[abposr]|glpat|AKIA|AIza|ya29|eyJ)[-_.]?[A-Za-z0-9]/;

/**
 * The path of a proxied call as the activity log keeps it: never a query string or fragment; any
 * segment that looks like a key, token or other opaque secret (a long run of token characters mixing
 * letters and digits, or a well-known secret prefix) replaced by `{redacted}`; at most 256 characters.
 * UUIDs and plain numbers are ids and are kept.
 */
export function redactCallPath(path: string | null | undefined): string | null {
  if (path === null || path === undefined) return null;
  const bare = path.split(/[?#]/, 1)[0] ?? '';
  const segments = bare.split('/').map((segment) => {
    if (segment === '' || UUID.test(segment)) return segment;
    if (SECRET_PREFIX.test(segment) && segment.length >= 12) return '{redacted}';
    if (OPAQUE_SEGMENT.test(segment) && /[A-Za-z]/.test(segment) && /\d/.test(segment)) return '{redacted}';
    return segment;
  });
  const redacted = segments.join('/') || '/';
  return redacted.length > MAX_PATH ? `${redacted.slice(0, MAX_PATH - 1)}…` : redacted;
}

/** A ledger description as the statement shows it: a proxy charge's path redacted like the activity log's. */
function statementDescription(row: StatementRow): string | null {
  if (row.description === null || row.item !== 'proxy') return row.description;
  const match = /^([A-Z]{1,16}) (\S.*)$/.exec(row.description);
  return match ? `${match[1]} ${redactCallPath(match[2])}` : row.description;
}

/**
 * Stores a batch of usage events (the usage worker, and an edge's fallback when Redis is away): paths
 * are redacted here, off the proxy's response path, before anything reaches Postgres.
 */
export async function storeUsageEvents(sql: Sql, events: UsageEvent[]): Promise<number> {
  return recordUsageEvents(
    sql,
    events.map((event) => (event.path ? { ...event, path: redactCallPath(event.path) } : event)),
  );
}

// ---------------------------------------------------------------------------------------------------
// Cursors and bounds

function encodeCursor(value: unknown): string {
  return Buffer.from(JSON.stringify(value)).toString('base64url');
}

function badCursor(): PlatformError {
  return new PlatformError('validation_failed', 'cursor is not a cursor this list gave out', {
    hint: 'Pass the nextCursor of the previous page unchanged, or omit cursor to start from the first page.',
  });
}

function decodeCursor(cursor: string): unknown {
  try {
    return JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
  } catch {
    throw badCursor();
  }
}

const ISO_MICROS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const UUID_ANY = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function activityPosition(cursor: string): ActivityPosition {
  const value = decodeCursor(cursor);
  if (!Array.isArray(value) || value[0] !== 'a' || typeof value[1] !== 'string' || typeof value[2] !== 'string') throw badCursor();
  if (!ISO_MICROS.test(value[1]) || !UUID_ANY.test(value[2])) throw badCursor();
  return { at: value[1], id: value[2] };
}

function statementPosition(cursor: string): bigint {
  const value = decodeCursor(cursor);
  if (!Array.isArray(value) || value[0] !== 's' || typeof value[1] !== 'string' || !/^\d{1,18}$/.test(value[1])) throw badCursor();
  return BigInt(value[1]);
}

function assertPeriod(from: Date | null | undefined, to: Date | null | undefined, names: [string, string]): void {
  if (from && to && from.getTime() >= to.getTime()) {
    throw new PlatformError('validation_failed', `${names[0]} must be before ${names[1]}`, {
      hint: `Give ${names[0]} as the start (inclusive) and ${names[1]} as the end (exclusive), as ISO 8601 times such as 2026-01-31T00:00:00Z.`,
    });
  }
}

// ---------------------------------------------------------------------------------------------------
// Activity

/** What a person (or an agent) can do about a call that failed, by the platform's error code. */
const HINTS: Record<string, string> = {
  upstream_error: 'The API answered with a server error, or broke off its answer. The call was refunded. Retry later.',
  upstream_unavailable: 'The API could not be reached, did not answer in time, or said it was unavailable (503). The call was refunded. Retry later.',
  payload_too_large: 'The request body was larger than the proxy allows. The call was refunded. Send a smaller body.',
  private_upstream:
    "The API's address is a private one, which the proxy refuses. The call was refunded. The operator must correct the API's base URL.",
};

function hintFor(row: ActivityRow): string | null {
  if (row.error_code) return HINTS[row.error_code] ?? (row.outcome === 'refunded' ? 'The call was refunded.' : null);
  if (row.status >= 400) {
    return `The API itself answered ${row.status}; the call kept its cost because the API did the work. Check the request against the API's instructions (GET /api/v1/apis/${row.api_id}/instructions).`;
  }
  return null;
}

export interface ActivityEntry {
  id: string;
  at: string;
  apiId: string;
  item: string;
  method: string | null;
  path: string | null;
  status: number;
  outcome: ActivityOutcome;
  errorCode: string | null;
  hint: string | null;
  cost: number;
  costMicros: string;
  charged: number;
  chargedMicros: string;
  refund: number;
  refundMicros: string;
  /** True when the call is owed a refund that is not in the ledger yet (it is queued; the reconciler settles it). */
  refundPending: boolean;
  chargeId: string | null;
  refundId: string | null;
  paidWith: 'balance' | 'x402' | null;
  /** The call's request id (its answer's X-Request-Id, or the MCP request's); null for calls recorded before it was kept. */
  requestId: string | null;
  latencyMs: number;
  bytesIn: number;
  bytesOut: number;
  key: { id: string; kind: 'api' | 'agent' | null; name: string | null; prefix: string | null } | null;
}

export function presentActivity(row: ActivityRow): ActivityEntry {
  const refunded = row.outcome === 'refunded';
  const refundMicros = row.refund_micros ?? (refunded ? row.charged_micros - row.cost_micros : 0n);
  return {
    id: row.id,
    at: row.at,
    apiId: row.api_id,
    item: row.item,
    method: row.method,
    path: redactCallPath(row.path),
    status: row.status,
    outcome: row.outcome,
    errorCode: row.error_code,
    hint: row.outcome === 'served' ? null : hintFor(row),
    cost: toDollars(row.cost_micros),
    costMicros: row.cost_micros.toString(),
    charged: toDollars(row.charged_micros),
    chargedMicros: row.charged_micros.toString(),
    refund: toDollars(refundMicros),
    refundMicros: refundMicros.toString(),
    refundPending: refunded && row.refund_id === null && row.charge_id !== null && row.paid_with !== 'x402',
    chargeId: row.charge_id,
    refundId: row.refund_id,
    paidWith: row.paid_with ?? (row.charged_micros > 0n ? 'balance' : null),
    requestId: row.request_id,
    latencyMs: row.latency_ms,
    bytesIn: Number(row.bytes_in),
    bytesOut: Number(row.bytes_out),
    key: row.key_id === null ? null : { id: row.key_id, kind: row.key_kind, name: row.key_name, prefix: row.key_prefix },
  };
}

export interface ActivityQuery extends ActivityFilter {
  cursor?: string | undefined;
  limit: number;
}

/** A page of the account's activity, newest first, and the cursor of the next (null at the end). */
export async function readActivity(db: Db, accountId: string, query: ActivityQuery): Promise<{ items: ActivityEntry[]; nextCursor: string | null }> {
  assertPeriod(query.since, query.until, ['since', 'until']);
  const after = query.cursor ? activityPosition(query.cursor) : null;
  const rows = await listActivity(db, accountId, query, after, query.limit);
  const page = rows.slice(0, query.limit);
  const last = page[page.length - 1];
  return {
    items: page.map(presentActivity),
    nextCursor: rows.length > query.limit && last ? encodeCursor(['a', last.at, last.id]) : null,
  };
}

/** How far back each poll of the tail looks again: a batch that committed late, with an older write time, is still seen. */
const TAIL_LOOKBACK_MS = 10_000;
const TAIL_PAGE = 200;
const TAIL_PAGES_PER_POLL = 5;
const NIL_UUID = '00000000-0000-0000-0000-000000000000';

function matches(entry: ActivityEntry, filter: ActivityFilter): boolean {
  if (filter.apiId && entry.apiId !== filter.apiId) return false;
  if (filter.keyId && entry.key?.id !== filter.keyId) return false;
  if (filter.outcome && entry.outcome !== filter.outcome) return false;
  if (filter.requestId && entry.requestId !== filter.requestId) return false;
  if (filter.statusMin !== null && filter.statusMin !== undefined && entry.status < filter.statusMin) return false;
  if (filter.statusMax !== null && filter.statusMax !== undefined && entry.status > filter.statusMax) return false;
  return true;
}

/**
 * The live tail of an account's activity: each `poll` answers the calls recorded since the last one
 * (matching the filter), each once. It reads Postgres, where the usage worker writes, so it works
 * the same behind any edge; a call shows once its usage batch is written (a second or so).
 *
 * Each poll reads on from the last row it read (by write time and id). A batch whose transaction
 * committed late carries a write time before rows already read: to see it, each poll counts the rows
 * written within the look-back window up to that position and compares the count with the rows it
 * has read there; only when they differ does it read the window again, skipping what it sent. (Before,
 * every poll read the whole window again: at 100 calls a second, 1,000 rows a poll for each open
 * stream, most of the edge's promoted garbage in the memory soak.)
 */
export class ActivityTail {
  /** Rows read, by id, with their write time (`recorded_at`, ISO with microseconds), kept while inside twice the look-back window. */
  private readonly sent = new Map<string, string>();
  private newest: number;
  /** The last row read (the greatest by write time and id); null before the first poll. */
  private cursor: { recordedAt: string; id: string } | null = null;
  /** Where the last poll stopped when it read its most pages and more were there: the next one goes on from it. */
  private resume: { recordedAt: string; id: string } | null = null;
  /** Rows read from Postgres so far (each poll's cost; tests read it). */
  rowsRead = 0;

  constructor(
    private readonly db: Db,
    private readonly accountId: string,
    private readonly filter: ActivityFilter,
    start: Date = new Date(),
  ) {
    this.newest = start.getTime();
  }

  /**
   * Takes note of what is already written when the tail starts (within the look-back window), so
   * that only calls written from now on are sent, including ones from a batch that was already
   * under way. Call it once, before the first poll.
   */
  async prime(): Promise<void> {
    await this.poll();
  }

  /** The start of the look-back window, in the rows' own format (ISO with microseconds). */
  private windowStart(): string {
    return isoMicros(this.newest - TAIL_LOOKBACK_MS);
  }

  /** Whether a row was written within the window at or before the cursor that this tail has not read. */
  private async lateRows(cursor: { recordedAt: string; id: string }): Promise<boolean> {
    const from = this.windowStart();
    let read = 0;
    for (const recordedAt of this.sent.values()) if (recordedAt > from) read += 1;
    return (await countActivityRecordedBetween(this.db, this.accountId, from, cursor)) !== read;
  }

  async poll(): Promise<ActivityEntry[]> {
    const fresh: ActivityEntry[] = [];
    let after = this.resume ?? (this.cursor && !(await this.lateRows(this.cursor)) ? this.cursor : { recordedAt: this.windowStart(), id: NIL_UUID });
    this.resume = null;
    for (let page = 0; page < TAIL_PAGES_PER_POLL; page += 1) {
      const rows = await activityRecordedAfter(this.db, this.accountId, after, TAIL_PAGE);
      this.rowsRead += rows.length;
      for (const row of rows) {
        const recorded = Date.parse(row.recorded_at);
        if (recorded > this.newest) this.newest = recorded;
        if (this.sent.has(row.id)) continue;
        this.sent.set(row.id, row.recorded_at);
        const entry = presentActivity(row);
        if (matches(entry, this.filter)) fresh.push(entry);
      }
      const last = rows[rows.length - 1];
      if (last && (!this.cursor || positionAfter(last, this.cursor))) this.cursor = { recordedAt: last.recorded_at, id: last.id };
      if (rows.length < TAIL_PAGE || !last) break;
      after = { recordedAt: last.recorded_at, id: last.id };
      if (page === TAIL_PAGES_PER_POLL - 1) this.resume = after;
    }
    const horizon = isoMicros(this.newest - 2 * TAIL_LOOKBACK_MS);
    for (const [id, recordedAt] of this.sent) if (recordedAt < horizon) this.sent.delete(id);
    return fresh;
  }
}

/** A time in milliseconds as the rows write theirs (`recorded_at`: ISO, UTC, microseconds), so the two compare as strings. */
const isoMicros = (ms: number) => new Date(ms).toISOString().replace('Z', '000Z');

/** Whether a row comes after a position by write time, then id (times compare as strings: one fixed ISO format). */
function positionAfter(row: { recorded_at: string; id: string }, position: { recordedAt: string; id: string }): boolean {
  return row.recorded_at > position.recordedAt || (row.recorded_at === position.recordedAt && row.id > position.id);
}

// ---------------------------------------------------------------------------------------------------
// Statement

export interface StatementEntry {
  id: string;
  at: string;
  kind: StatementRow['kind'];
  amount: number;
  amountMicros: string;
  balanceAfter: number;
  balanceAfterMicros: string;
  apiId: string | null;
  item: string | null;
  description: string | null;
  keyId: string | null;
  /** For a refund: the charge it returns. */
  refundOf: string | null;
  /** For a charge made from a credit hold: the hold (its row was written when the hold was settled). */
  holdId: string | null;
}

export interface StatementSummary {
  entries: number;
  credits: number;
  creditsMicros: string;
  debits: number;
  debitsMicros: string;
  /** credits + debits: what the period changed. */
  net: number;
  netMicros: string;
  openingBalance: number | null;
  openingBalanceMicros: string | null;
  closingBalance: number | null;
  closingBalanceMicros: string | null;
}

function presentEntry(row: StatementRow): StatementEntry {
  return {
    id: row.id,
    at: row.at,
    kind: row.kind,
    amount: toDollars(row.amount_micros),
    amountMicros: row.amount_micros.toString(),
    balanceAfter: toDollars(row.balance_after_micros),
    balanceAfterMicros: row.balance_after_micros.toString(),
    apiId: row.api_id,
    item: row.item,
    description: statementDescription(row),
    keyId: row.key_id,
    refundOf: row.refund_of,
    holdId: row.hold_id,
  };
}

export interface StatementQuery extends StatementPeriod {
  cursor?: string | undefined;
  limit: number;
}

/** The period's totals (on every page) and one page of its entries in posting order. */
export async function readStatement(
  db: Db,
  accountId: string,
  query: StatementQuery,
): Promise<{ summary: StatementSummary; entries: StatementEntry[]; nextCursor: string | null }> {
  assertPeriod(query.from, query.to, ['from', 'to']);
  const after = query.cursor ? statementPosition(query.cursor) : null;
  const [totals, rows] = await Promise.all([statementTotals(db, accountId, query), statementEntries(db, accountId, query, after, query.limit)]);
  const page = rows.slice(0, query.limit);
  const last = page[page.length - 1];
  const net = totals.credits_micros + totals.debits_micros;
  return {
    summary: {
      entries: totals.entries,
      credits: toDollars(totals.credits_micros),
      creditsMicros: totals.credits_micros.toString(),
      debits: toDollars(totals.debits_micros),
      debitsMicros: totals.debits_micros.toString(),
      net: toDollars(net),
      netMicros: net.toString(),
      openingBalance: totals.opening_micros === null ? null : toDollars(totals.opening_micros),
      openingBalanceMicros: totals.opening_micros === null ? null : totals.opening_micros.toString(),
      closingBalance: totals.closing_micros === null ? null : toDollars(totals.closing_micros),
      closingBalanceMicros: totals.closing_micros === null ? null : totals.closing_micros.toString(),
    },
    entries: page.map(presentEntry),
    nextCursor: rows.length > query.limit && last ? encodeCursor(['s', last.seq.toString()]) : null,
  };
}

export const STATEMENT_CSV_COLUMNS = [
  'id',
  'at',
  'kind',
  'amount',
  'amount_micros',
  'balance_after',
  'balance_after_micros',
  'api_id',
  'item',
  'description',
  'key_id',
  'refund_of',
  'hold_id',
] as const;

/** RFC 4180 field: quoted when it holds a comma, quote or line break; a leading =, +, - or @ is neutralised for spreadsheets. */
function csvField(value: string | null): string {
  if (value === null) return '';
  const safe = /^[=+\-@\t\r]/.test(value) && !/^-?\d+(\.\d+)?$/.test(value) ? `'${value}` : value;
  return /[",\r\n]/.test(safe) ? `"${safe.replace(/"/g, '""')}"` : safe;
}

/**
 * The whole period as CSV (a header line, then one line per entry in posting order), read in pages
 * of `pageSize` so a long history is never held in memory. Amounts are exact decimal dollars.
 */
export function statementCsv(db: Db, accountId: string, period: StatementPeriod, pageSize = 1_000): AsyncGenerator<string> {
  // Checked now, before the answer starts: an error cannot reach the caller once the CSV is flowing.
  assertPeriod(period.from, period.to, ['from', 'to']);
  return statementLines(db, accountId, period, pageSize);
}

async function* statementLines(db: Db, accountId: string, period: StatementPeriod, pageSize: number): AsyncGenerator<string> {
  yield `${STATEMENT_CSV_COLUMNS.join(',')}\r\n`;
  let after: bigint | null = null;
  for (;;) {
    const rows = await statementEntries(db, accountId, period, after, pageSize);
    const page = rows.slice(0, pageSize);
    let chunk = '';
    for (const row of page) {
      const fields = [
        row.id,
        row.at,
        row.kind,
        formatDollars(row.amount_micros),
        row.amount_micros.toString(),
        formatDollars(row.balance_after_micros),
        row.balance_after_micros.toString(),
        row.api_id,
        row.item,
        statementDescription(row),
        row.key_id,
        row.refund_of,
        row.hold_id,
      ];
      chunk += `${fields.map(csvField).join(',')}\r\n`;
    }
    if (chunk) yield chunk;
    const last = page[page.length - 1];
    if (rows.length <= pageSize || !last) return;
    after = last.seq;
  }
}
