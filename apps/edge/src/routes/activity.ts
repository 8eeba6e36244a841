import { Readable } from 'node:stream';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { ActivityTail, readActivity, readStatement, statementCsv, type ActivityQuery } from '#core/billing';
import type { Caller } from '#core/identity';
import { PlatformError } from '#core/platform';
import { apiId as API_ID } from '#contracts/directory';
import { errorResponses } from './error-responses.js';
import { operation, restDoor } from '../http/operation.js';
import { REQUEST_ID } from '../http/request-id.js';
import { requireAuth } from '../plugins/auth.js';
import type { StreamCloseReason } from '../plugins/event-streams.js';

/** How often an activity stream looks for new calls. */
const ACTIVITY_POLL_MS = 1_000;

/** A point in time: an ISO 8601 date-time with its offset, or a date (midnight UTC). */
const instant = (name: string, meaning: string) =>
  z
    .string()
    .max(40)
    .refine((value) => /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?(Z|[+-]\d{2}:\d{2}))?$/.test(value) && !Number.isNaN(Date.parse(value)), {
      message: `${name} must be an ISO 8601 time such as 2026-01-31T12:00:00Z, or a date such as 2026-01-31`,
    })
    .transform((value) => new Date(value))
    .optional()
    .describe(`${meaning}: an ISO 8601 time with its offset, or a date (midnight UTC)`);

const limit = z.coerce
  .number({ message: 'limit must be an integer from 1 to 200' })
  .int('limit must be an integer from 1 to 200')
  .min(1, 'limit must be at least 1')
  .max(200, 'limit must be at most 200')
  .default(50)
  .describe('Entries per page (default 50, max 200)');
const cursor = z.string().min(1).max(300).optional().describe("The previous page's nextCursor");

/** `status`: one status (404) or a class (4xx). */
const statusFilter = z
  .string()
  .regex(/^(?:[1-5]\d\d|[1-5]xx)$/, { message: 'status must be a status such as 404, or a class such as 4xx or 5xx' })
  .optional()
  .describe('One status (404) or a class (2xx, 4xx, 5xx)');

function statusBounds(status: string | undefined): { statusMin: number | null; statusMax: number | null } {
  if (!status) return { statusMin: null, statusMax: null };
  if (status.endsWith('xx')) {
    const hundred = Number(status[0]) * 100;
    return { statusMin: hundred, statusMax: hundred + 99 };
  }
  return { statusMin: Number(status), statusMax: Number(status) };
}

const activityFilters = {
  api: API_ID.optional().describe('Only calls to this API id'),
  key: z.string().min(1).max(100).optional().describe('Only calls made with this key id (an API key or agent key of the account)'),
  outcome: z
    .enum(['served', 'failed', 'refunded'], { message: 'outcome must be served, failed or refunded' })
    .optional()
    .describe('served: answered and kept its cost; failed: an error answer (kept its cost, or cost nothing); refunded: charged, then returned'),
  status: statusFilter,
  since: instant('since', 'Calls at or after this time'),
  until: instant('until', 'Calls before this time'),
  requestId: z
    .string()
    .regex(REQUEST_ID, { message: 'requestId must be a request id such as the X-Request-Id header of an answer' })
    .optional()
    .describe("Only the call (or calls) with this request id: the X-Request-Id header of the call's answer"),
};
const activityQuery = z.object({ ...activityFilters, limit, cursor });

const money = (what: string) => ({
  number: z.number().describe(`${what} in dollars`),
  micros: z.string().describe(`${what} in micro-dollars (1 dollar = 1,000,000), exact`),
});

const activityEntry = z.object({
  id: z.string().describe('The usage event id'),
  at: z.string().describe('When the call ended (UTC, microseconds)'),
  apiId: z.string(),
  item: z.string().describe("What was bought: 'proxy' for a proxied call; 'instructions', 'doc', 'cookbook' for the platform's priced reads"),
  method: z.string().nullable().describe('The proxied request method (null for other items and older calls)'),
  path: z
    .string()
    .nullable()
    .describe('The path under the API base URL, redacted: never the query string; opaque, key-like segments read {redacted}'),
  status: z.number().describe('The status the caller got'),
  outcome: z.enum(['served', 'failed', 'refunded']),
  errorCode: z.string().nullable().describe("The platform's error code of a refunded or failed call (upstream_error, upstream_unavailable, ...)"),
  hint: z.string().nullable().describe('What to do about a failed or refunded call'),
  cost: money('What the call cost after any refund').number,
  costMicros: money('What the call cost after any refund').micros,
  charged: money('What the call was charged').number,
  chargedMicros: money('What the call was charged').micros,
  refund: money('What was refunded').number,
  refundMicros: money('What was refunded').micros,
  refundPending: z.boolean().describe('A refund is owed and queued but not in the ledger yet'),
  chargeId: z.string().nullable().describe('The ledger charge (see GET /statement)'),
  refundId: z.string().nullable().describe('The ledger refund of that charge'),
  paidWith: z.enum(['balance', 'x402']).nullable(),
  requestId: z
    .string()
    .nullable()
    .describe(
      "The X-Request-Id of the call's answer (for an MCP tool call, that of the POST /mcp request, which call_api returns as requestId); null for calls recorded before request ids were kept",
    ),
  latencyMs: z.number(),
  bytesIn: z.number(),
  bytesOut: z.number(),
  key: z
    .object({ id: z.string(), kind: z.enum(['api', 'agent']).nullable(), name: z.string().nullable(), prefix: z.string().nullable() })
    .nullable()
    .describe('The key or agent key that made the call (its id and prefix, never the key); null for the dashboard session'),
});

/** An agent key sees its own calls only; an account key or the dashboard sees every key's. */
function ownKeyFilter(caller: Caller, key: string | undefined): string | null {
  if (caller.keyKind !== 'agent') return key ?? null;
  if (key !== undefined && key !== caller.keyId) {
    throw new PlatformError('agent_key_forbidden', "An agent key can read its own calls only, not another key's", {
      hint: 'Drop the key filter, or read the whole account with an account API key or in the dashboard.',
    });
  }
  return caller.keyId;
}

function activityFilterOf(caller: Caller, query: z.output<typeof activityQuery>): ActivityQuery {
  return {
    apiId: query.api ?? null,
    keyId: ownKeyFilter(caller, query.key),
    outcome: query.outcome ?? null,
    ...statusBounds(query.status),
    since: query.since ?? null,
    until: query.until ?? null,
    requestId: query.requestId ?? null,
    cursor: query.cursor,
    limit: query.limit,
  };
}

/** GET /activity and the get_activity tool. */
export const readActivityOperation = operation({ querystring: activityQuery }, async (app, door, { query }) => {
  const page = await readActivity(app.deps.sql, door.caller.accountId, activityFilterOf(door.caller, query));
  return { ok: true as const, activity: page.items, nextCursor: page.nextCursor };
});

const kinds = ['signup_credit', 'topup', 'charge', 'refund', 'adjustment', 'clawback', 'x402_credit', 'forfeit'] as const;
const statementEntry = z.object({
  id: z.string().describe('The ledger entry id (a charge id is the chargeId of its call in GET /activity)'),
  at: z.string().describe('When the movement happened (UTC, microseconds); a charge made from a credit hold carries its call time'),
  kind: z.enum(kinds),
  amount: z.number().describe('Signed dollars: credits positive, charges, clawbacks and forfeits negative'),
  amountMicros: z.string(),
  balanceAfter: z.number().describe('The balance right after this entry, in dollars (the running balance)'),
  balanceAfterMicros: z.string(),
  apiId: z.string().nullable(),
  item: z.string().nullable(),
  description: z.string().nullable(),
  keyId: z.string().nullable(),
  refundOf: z.string().nullable().describe('For a refund: the charge it returns'),
  holdId: z.string().nullable().describe('For a charge made from a credit hold: the hold'),
});
const nullableMoney = { number: z.number().nullable(), micros: z.string().nullable() };
const statementSummary = z.object({
  entries: z.number(),
  credits: z.number(),
  creditsMicros: z.string(),
  debits: z.number().describe('Negative or zero'),
  debitsMicros: z.string(),
  net: z.number().describe('credits + debits'),
  netMicros: z.string(),
  openingBalance: nullableMoney.number.describe("The balance before the period's first entry (null when the period has none)"),
  openingBalanceMicros: nullableMoney.micros,
  closingBalance: nullableMoney.number.describe("The balance after the period's last entry"),
  closingBalanceMicros: nullableMoney.micros,
});
const statementQuery = z.object({
  from: instant('from', 'Entries at or after this time'),
  to: instant('to', 'Entries before this time'),
  format: z
    .enum(['json', 'csv'], { message: 'format must be json or csv' })
    .optional()
    .describe('csv: the whole period as CSV (as Accept: text/csv)'),
  limit,
  cursor,
});

/** The activity log of metered calls and the statement of ledger movements (docs/decisions/activity-and-statement.md). */
const activityRoutes: FastifyPluginAsyncZod = async (app) => {
  const { sql, settings } = app.deps;

  app.get(
    '/activity',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['usage'],
        summary: 'Every metered call, newest first: served, failed and refunded, with its cost, refund, status and key',
        description:
          "Filter by api, key, outcome, status, time (since inclusive, until exclusive) and requestId (the X-Request-Id header of the call's answer). Paged with cursor and nextCursor. Calls appear once their usage is recorded (a second or so). An agent key sees its own calls only. Calls refused before any charge (401, 402, 429) are not metered calls and do not appear.",
        querystring: activityQuery,
        response: {
          200: z.object({ ok: z.literal(true), activity: z.array(activityEntry), nextCursor: z.string().nullable() }),
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request, reply) => readActivityOperation.run(app, restDoor(request, reply), request),
  );

  app.get(
    '/activity/stream',
    {
      config: { auth: 'key' },
      schema: {
        tags: ['usage'],
        summary: 'Server-sent events: each new metered call as it is recorded',
        description:
          'Each event is `event: call` with the activity entry as JSON `data:` and its id as `id:`. Takes the filters of GET /activity (not cursor or limit). Comment lines are heartbeats. A stream ends after SSE_MAX_LIFETIME_SECONDS, and with a last `stream.closed` event when its key is disabled or revoked; reconnect and read GET /activity?since= for what came between.',
        querystring: z.object(activityFilters),
        response: { ...errorResponses(400, 401, 403, 429) },
      },
    },
    async (request, reply) => {
      const caller = requireAuth(request);
      const query = request.query;
      const filter = activityFilterOf(caller, { ...query, limit: 1, cursor: undefined });
      let closeFor: (reason: StreamCloseReason) => void = () => {};
      // Before the stream is admitted and answered: a database that cannot be read is an ordinary 503.
      const tail = new ActivityTail(sql, caller.accountId, filter);
      await tail.prime();
      const admitted = await app.eventStreams.open(caller.accountId, caller.keyId, (reason) => closeFor(reason), caller.memberId);

      reply.hijack();
      const raw = reply.raw;
      raw.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
        'x-request-id': request.id,
      });
      raw.write('retry: 3000\n: activity\n\n');
      let finished = false;
      let polling = false;
      const finish = () => {
        if (finished) return;
        finished = true;
        clearTimeout(lifetime);
        clearInterval(poller);
        clearInterval(heartbeat);
        admitted.release();
        if (!raw.writableEnded) raw.end();
      };
      const lifetime = setTimeout(finish, settings.SSE_MAX_LIFETIME_SECONDS * 1000);
      lifetime.unref();
      const heartbeat = setInterval(() => {
        if (!finished) raw.write(': heartbeat\n\n');
      }, settings.SSE_HEARTBEAT_MS);
      heartbeat.unref();
      // One query a poll per stream (streams per account are capped by SSE_MAX_STREAMS_PER_ACCOUNT).
      const poller = setInterval(() => {
        if (finished || polling) return;
        polling = true;
        tail
          .poll()
          .then((entries) => {
            for (const entry of entries) if (!finished) raw.write(`id: ${entry.id}\nevent: call\ndata: ${JSON.stringify(entry)}\n\n`);
          })
          .catch((error: unknown) => request.log.warn({ err: error }, 'activity stream poll failed; trying again'))
          .finally(() => {
            polling = false;
          });
      }, ACTIVITY_POLL_MS);
      poller.unref();
      closeFor = (reason) => {
        if (finished) return;
        raw.write(`event: stream.closed\ndata: ${JSON.stringify({ ok: false, ...reason })}\n\n`);
        finish();
      };
      request.raw.on('close', finish);
      raw.on('close', finish);
      if (request.raw.destroyed || raw.destroyed) finish();
    },
  );

  app.get(
    '/statement',
    {
      config: { auth: 'account', csvAnswer: true },
      schema: {
        tags: ['balance'],
        summary: 'Every ledger movement (top-ups, charges, refunds, credits, clawbacks) with the balance after each, for a period',
        description:
          'Entries in posting order with the running balance; `summary` totals the whole period (from inclusive, to exclusive; both optional). Over all time, summary.net equals the balance. JSON is paged with cursor and nextCursor; `Accept: text/csv` or `format=csv` answers the whole period as CSV (columns: ' +
          'id, at, kind, amount, amount_micros, balance_after, balance_after_micros, api_id, item, description, key_id, refund_of, hold_id). Credit holds move no money by themselves: the charges made from a hold appear when the hold is settled, at their call time.',
        querystring: statementQuery,
        response: {
          200: z.object({
            ok: z.literal(true),
            from: z.string().nullable(),
            to: z.string().nullable(),
            summary: statementSummary,
            entries: z.array(statementEntry),
            nextCursor: z.string().nullable(),
          }),
          ...errorResponses(400, 401, 403),
        },
      },
    },
    async (request, reply) => {
      const caller = requireAuth(request);
      const { from, to, format } = request.query;
      const accept = request.headers.accept ?? '';
      const csv = format === 'csv' || (format === undefined && /\btext\/csv\b/i.test(accept) && !/\bapplication\/json\b/i.test(accept));
      if (csv) {
        const lines = statementCsv(sql, caller.accountId, { from: from ?? null, to: to ?? null });
        const name = `statement${from ? `-from-${from.toISOString().slice(0, 10)}` : ''}${to ? `-to-${to.toISOString().slice(0, 10)}` : ''}.csv`;
        return (
          reply
            .type('text/csv; charset=utf-8')
            .header('content-disposition', `attachment; filename="${name}"`)
            .header('cache-control', 'no-store')
            // A stream, which the JSON schema of the default answer does not describe (nor serialize).
            .send(Readable.from(lines) as never)
        );
      }
      const statement = await readStatement(sql, caller.accountId, {
        from: from ?? null,
        to: to ?? null,
        cursor: request.query.cursor,
        limit: request.query.limit,
      });
      return {
        ok: true as const,
        from: from?.toISOString() ?? null,
        to: to?.toISOString() ?? null,
        summary: statement.summary,
        entries: statement.entries,
        nextCursor: statement.nextCursor,
      };
    },
  );
};

export default activityRoutes;
