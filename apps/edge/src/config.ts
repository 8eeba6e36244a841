import { z } from 'zod';
import { parseDollars } from '#contracts/money';
import { metricsSettings, tracingSettings, isDevCodecKeys, isDevMasterKey, masterKeySetting } from '#core/platform';
import { envFlag, parseSettings, sharedSettings } from '#core/platform';
import { webhookSettings } from '#core/notifications';
import { stripeSettings, x402Settings } from '#core/billing';

const count = (fallback: number) => z.coerce.number().int().min(1).max(1_000_000_000).default(fallback);
/** An optional setting; empty (as docker-compose passes an unset `${VAR:-}`) means not set. */
const optional = <T extends z.ZodType>(schema: T) => z.preprocess((value) => (value === '' ? undefined : value), schema.optional());
/** A dollar amount (up to six decimals), as micro-dollars. */
const dollars = (fallback: string) =>
  z
    .string()
    .default(fallback)
    .transform((value, ctx) => {
      const micros = parseDollars(value);
      if (micros === null || micros <= 0n) {
        ctx.addIssue({ code: 'custom', message: 'expected a positive dollar amount such as 0.01' });
        return z.NEVER;
      }
      return micros;
    });
const seconds = (fallback: number) =>
  z.coerce
    .number()
    .int()
    .min(1)
    .max(86_400 * 30)
    .default(fallback);

/**
 * Node's options for an edge unless EDGE_NODE_OPTIONS says otherwise (`npm run up`, docker-compose.yml,
 * the image's command, the benchmarks and the soak start it with them): a young generation of 8 MB
 * semi-spaces instead of V8's own sizing (a 67 MB new space on a 24 GB host, 17 MB with it). Two soaks side by
 * side held the edge at 240 MB against 350 MB; the proxy's peak kept 0.32 of the bare proxy against
 * 0.34 for the plain edge in the same rounds (docs/decisions/edge-young-generation.md). V8 reads the
 * size when the process starts, so it cannot be set from inside like EDGE_HEAP_GROWING_PERCENT.
 */
export const DEFAULT_EDGE_NODE_OPTIONS = '--max-semi-space-size=8';

/**
 * V8 heap limits that keep an edge asking the directory ranking process under 300 MB through an hour
 * of the soak's mixed load (211 -> 265 MB, against 258 -> 678 -> 418 MB with Node's defaults), at a
 * price: at peak proxy load V8 then collects the old generation far more often (its heap growing
 * factor follows the heap limit), and the proxy kept 0.22 of the bare proxy's throughput against 0.33
 * without them (docs/decisions/edge-heap-limits.md). Not the default: an operator who wants the
 * smaller edge sets EDGE_NODE_OPTIONS to them (`npm run up` and docker-compose.yml pass
 * EDGE_NODE_OPTIONS as the edge's NODE_OPTIONS; the benchmarks and the soak start their edges with it).
 */
export const LOW_MEMORY_EDGE_NODE_OPTIONS = '--max-old-space-size=192 --max-semi-space-size=8';

/** The edge's settings: one zod schema, parsed once at start-up. Every key is listed in .env.example. */
export const edgeSettings = sharedSettings
  .extend(webhookSettings.shape)
  .extend(stripeSettings.shape)
  .extend(x402Settings.shape)
  .extend(metricsSettings.shape)
  .extend(tracingSettings.shape)
  .extend({
    HOST: z.string().default('127.0.0.1'),
    PORT: z.coerce.number().int().min(0).max(65535).default(3000),
    /**
     * Which X-Forwarded-For entries to believe: `false` (none: the socket's address is the client), a
     * hop count (the number of proxies in front of the edge: the client is that many entries from the
     * right), or a comma list of the proxies' addresses or networks (CIDR). `true` is refused: it
     * believes the leftmost entry, which any client can write, and so escapes every per-address limit.
     */
    TRUST_PROXY: z
      .union([z.boolean(), z.string()])
      .default(false)
      .transform((value, ctx): false | number | string[] => {
        const text = String(value).trim().toLowerCase();
        if (text === '' || text === 'false' || text === '0' || text === 'no' || text === 'off') return false;
        if (text === 'true' || text === 'yes' || text === 'on') {
          ctx.addIssue({
            code: 'custom',
            message:
              "true would believe any client's X-Forwarded-For; give the number of proxies in front of the edge (e.g. 1) or their addresses/networks (e.g. 10.0.0.0/8)",
          });
          return z.NEVER;
        }
        if (/^\d{1,2}$/.test(text)) return Number(text);
        const entries = text
          .split(',')
          .map((entry) => entry.trim())
          .filter(Boolean);
        if (entries.every((entry) => /^[0-9a-f:.]+(\/\d{1,3})?$/.test(entry))) return entries;
        ctx.addIssue({ code: 'custom', message: 'expected false, a hop count such as 1, or a comma list of addresses/CIDR networks' });
        return z.NEVER;
      }),
    /** Largest JSON body the API accepts (bytes); bigger bodies get 413. */
    BODY_LIMIT_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(100 * 1024 * 1024)
      .default(1024 * 1024),
    /** How deep a JSON body's objects and arrays may nest; deeper bodies get 400 naming the limit. */
    JSON_MAX_DEPTH: z.coerce.number().int().min(4).max(1_000).default(32),
    /** How long a verified key stays in the in-process cache; revocations are pushed through Redis regardless. */
    KEY_CACHE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(60_000),
    /** Secret for signing dashboard session JWTs (HS256). Must be set in production. */
    SESSION_SECRET: z.string().min(32).default('dev-only-session-secret-change-me-0123456789'),
    /** Folder of the built dashboard (index.html and assets/); defaults to apps/dashboard/dist. */
    DASHBOARD_DIST: optional(z.string().min(1)),
    /** Lifetime of a dashboard session (cookie and JWT), in seconds. */
    SESSION_TTL_SECONDS: seconds(43_200),
    /** Credit written to a new account's ledger at registration, in dollars; unset: 1.00, or 0 in production. */
    SIGNUP_CREDIT_DOLLARS: optional(
      z.string().transform((value, ctx) => {
        const micros = parseDollars(value);
        if (micros === null) {
          ctx.addIssue({ code: 'custom', message: 'expected a dollar amount such as 1.00' });
          return z.NEVER;
        }
        return micros;
      }),
    ),
    /** Rate limits (fixed windows in Redis, shared by every edge instance). Per key, or per account for the dashboard cookie. */
    RATE_LIMIT_KEY_MAX: count(600),
    RATE_LIMIT_KEY_WINDOW_SECONDS: seconds(60),
    /** Per account, over all its keys and its dashboard session: minting keys does not multiply the per-key limit. */
    RATE_LIMIT_ACCOUNT_MAX: count(1_800),
    RATE_LIMIT_ACCOUNT_WINDOW_SECONDS: seconds(60),
    /** Live (not revoked) API keys, and separately agent keys, an account may hold. */
    MAX_KEYS_PER_ACCOUNT: count(50),
    /** Per client address on public routes. */
    RATE_LIMIT_PUBLIC_MAX: count(120),
    RATE_LIMIT_PUBLIC_WINDOW_SECONDS: seconds(60),
    /** Per client address on POST /api/auth/login, accept-invite and password-reset (one budget). */
    RATE_LIMIT_LOGIN_MAX: count(10),
    RATE_LIMIT_LOGIN_WINDOW_SECONDS: seconds(300),
    /**
     * Failed sign-ins (core identity's LoginThrottle): counted per client address and per (e-mail,
     * client), never per e-mail alone, so nobody can lock a person out. Past the free failures each one
     * makes that client wait, doubling from the base up to the maximum; nothing locks for good.
     */
    LOGIN_FREE_FAILURES_PER_ADDRESS: count(5),
    LOGIN_FREE_FAILURES_PER_CLIENT: count(20),
    LOGIN_FAILURE_WINDOW_SECONDS: seconds(900),
    LOGIN_DELAY_BASE_SECONDS: seconds(1),
    LOGIN_DELAY_MAX_SECONDS: seconds(900),
    /** This many distinct clients failing at one address within the window e-mails its person (once per window). */
    LOGIN_ALERT_CLIENTS: count(5),
    LOGIN_ALERT_WINDOW_SECONDS: seconds(3_600),
    /** Invitation e-mails (new invitations and resends) one account may send per 24 hours. */
    INVITES_PER_ACCOUNT_PER_DAY: count(20),
    /** Password reset e-mails one address may get per hour; further requests are answered alike and send nothing. */
    PASSWORD_RESETS_PER_ADDRESS_PER_HOUR: count(3),
    /** Verification e-mails (sign-up's and resent ones) and e-mail change links one person may ask for per hour. */
    ACCOUNT_EMAILS_PER_PERSON_PER_HOUR: count(5),
    /**
     * `required` (the default): an account whose owner has not verified the address may do everything
     * free and spend its sign-up credit, but may not add funds or invite approvers until it is
     * verified; sign-up mails the verification link. `off` lifts the limits and mails nobody unasked
     * (a closed installation whose people are known); people may still verify from Settings.
     */
    EMAIL_VERIFICATION: z.enum(['required', 'off']).default('required'),
    /** Per client address on POST /api/v1/register. */
    RATE_LIMIT_REGISTER_MAX: count(5),
    RATE_LIMIT_REGISTER_WINDOW_SECONDS: seconds(3_600),
    /**
     * Local quotas: most of a subject's (key's, account's, address's) budget one edge claims from Redis
     * ahead of its hits and spends without a round trip; also never more than a twentieth of the limit.
     * Across N edges a subject may be refused up to (N-1) times this many calls early in a window, never
     * admitted past its limit. 1 counts every hit in Redis before it goes on. Sign-in and sign-up always are.
     */
    RATE_LIMIT_LOCAL_BLOCK_MAX: count(100),
    /** Seconds search, discovery and category answers stay in the shared Redis cache; 0 disables it. */
    DIRECTORY_CACHE_SECONDS: z.coerce.number().int().min(0).max(3600).default(30),
    /**
     * With DIRECTORY_RANK_URL empty only (tests, development): worker threads that rank and render search
     * and discovery answers beside the edge's event loop (started with the first search), each with its own
     * copy of the directory index and of discovery's embedding model: about 380 MB of memory at rest and up
     * to 500 MB more under sustained load, and two database connections. 0 ranks on the event loop. The
     * ranking process reads the same setting for its own threads.
     */
    DIRECTORY_RANK_WORKERS: z.coerce.number().int().min(0).max(32).default(2),
    /**
     * Where search and discovery are ranked: the directory ranking process every edge on the machine
     * shares (workers/directory/main.ts, listening on DIRECTORY_RANK_HOST:DIRECTORY_RANK_PORT), so that
     * an edge holds no index. Empty ranks in this process (DIRECTORY_RANK_WORKERS), for tests and
     * development only: each edge then holds its own copies (docs/decisions/directory-ranking-process.md).
     */
    DIRECTORY_RANK_URL: z
      .union([z.literal(''), z.string().url()])
      .default('http://127.0.0.1:3090')
      .transform((value) => value || null),
    /**
     * Discovery's sentence-embedding model (docs/DISCOVERY.md): empty for the one the provisioning
     * scripts build into .venv/models, 'off' to rank by words only. About 75 MB per ranking thread.
     */
    DISCOVERY_MODEL_DIR: z.string().default(''),
    /** Task vectors each ranking thread remembers (about 1.5 KB each), so a task asked again is not embedded again; 0 embeds every time. */
    DISCOVERY_TASK_VECTORS: z.coerce.number().int().min(0).max(1_000_000).default(5000),
    /**
     * How often discovery's feedback signal (per API, the accounts that used it; docs/decisions/discovery-feedback.md)
     * is read when this edge ranks in process (DIRECTORY_RANK_URL empty), in seconds. 0 turns the signal off:
     * the edge then keeps nothing of what discovery listed to whom (set it as the ranking process's).
     */
    DISCOVERY_FEEDBACK_REFRESH_SECONDS: z.coerce.number().int().min(0).max(86_400).default(600),
    /**
     * The edge's log lines are written to stdout in blocks of about this many bytes (asynchronously; at the
     * latest a second later, and at shutdown): one write for many requests instead of one per request. 0 writes
     * every line at once (synchronously), which also keeps the last lines before a hard kill (SIGKILL, out of memory).
     * 16000 (about fifty request lines) rather than 4096: under the proxy bench's peak the edge spent 168 against
     * 180 µs of CPU per call with it (docs/decisions/buffered-log-writes.md).
     */
    LOG_BUFFER_BYTES: z.coerce.number().int().min(0).max(16_000).default(16_000),
    /**
     * How far V8 lets the edge's old generation grow past what its last full collection kept, in per cent
     * (V8's `--heap-growing-percent`, set by the edge at start: Node refuses the flag in NODE_OPTIONS).
     * 50: the next full collection comes when the heap is half as large again as what was alive; 0 leaves
     * it to V8, which on a large machine lets it grow several times over (docs/decisions/edge-heap-growth.md).
     */
    EDGE_HEAP_GROWING_PERCENT: z.coerce.number().int().min(0).max(1_000).default(50),
    /**
     * Share (0 to 1) of successful (2xx) metered proxy calls past LOG_REQUEST_FIRST_PER_SECOND in a second
     * whose `request completed` line is written at LOG_LEVEL=info; each such line carries `"sample"` with
     * this value. Every other line (other routes, any other status, warnings and errors) is always
     * written; each proxied call is recorded as a usage event with its request id regardless, and found
     * by it in the activity (docs/decisions/request-id-on-usage.md). 1 writes every line.
     */
    LOG_REQUEST_SAMPLE: z.coerce.number().min(0).max(1).default(0.01),
    /** Successful metered proxy calls logged each second before LOG_REQUEST_SAMPLE applies: a quiet edge logs every call. */
    LOG_REQUEST_FIRST_PER_SECOND: z.coerce.number().int().min(0).max(1_000_000).default(10),
    /** Operator credentials for the queue board (`user:password`); unset disables the board. */
    OPERATOR_BASIC_AUTH: optional(z.string().regex(/^[^:]+:.+$/, 'must be user:password')),
    /**
     * E-mail addresses (comma separated) of the people whose dashboard shows the operator's tools, such
     * as "Open workflow in Temporal UI" on a session; unset: nobody's does.
     */
    OPERATOR_EMAILS: optional(z.string().max(2000)),

    // --- money: top-ups, the metered proxy, bring-your-own-key, usage hand-off ---
    /**
     * sandbox: accounts may top themselves up (to a cap); live: top-ups need a real payment (403).
     * Unset: sandbox, but live in production, where sandbox needs ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION too
     * (see billingMode in core billing).
     */
    BILLING_MODE: optional(z.enum(['sandbox', 'live'])),
    /** Lets BILLING_MODE=sandbox mint money in production (for a closed beta); the edge warns at every start. */
    ALLOW_SANDBOX_TOPUPS_IN_PRODUCTION: envFlag.default(false),
    /** In sandbox mode a top-up may not take the balance above this many dollars. */
    SANDBOX_BALANCE_CAP_DOLLARS: z.coerce.number().int().min(1).max(1_000_000).default(1000),
    /** 32 bytes (64 hex digits or base64) sealing BYO keys and platform keys; must be set in production. */
    CONNECTIONS_MASTER_KEY: masterKeySetting,
    /** Largest request body the proxy forwards (bytes); streamed, never buffered. */
    PROXY_BODY_LIMIT_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(10 * 1024 * 1024 * 1024)
      .default(100 * 1024 * 1024),
    PROXY_CONNECT_TIMEOUT_MS: z.coerce.number().int().min(50).max(120_000).default(5_000),
    /** Time the upstream may take to answer with its status and headers. */
    PROXY_HEADERS_TIMEOUT_MS: z.coerce.number().int().min(50).max(600_000).default(30_000),
    /** Longest silence allowed between body chunks, both ways. */
    PROXY_BODY_TIMEOUT_MS: z.coerce.number().int().min(50).max(600_000).default(30_000),
    /**
     * How long a caller may take to hand over its request body (from the charge), and again to read
     * the answer (from its start). Past the first, the call is refunded (503: the upstream never had
     * the whole request); past the second, the answer is cut and keeps its charge (the upstream did its
     * work). The wait between them is the upstream's, bounded by PROXY_HEADERS_TIMEOUT_MS: a request
     * forwarded whole is never refunded for the caller's lateness. Keep 2 x this + the headers timeout
     * under the workers' REFUND_RECONCILE_AFTER_SECONDS (15 min): a charge still without an outcome at
     * that age is refunded as lost.
     */
    PROXY_MAX_CALL_MS: z.coerce.number().int().min(1_000).max(600_000).default(300_000),
    /** How long the proxy keeps an API row (URL, auth, prices) in memory; operator CLI changes evict it at once through Redis. 0 disables the cache. */
    API_CACHE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(10_000),
    /** How long the proxy keeps a caller's bring-your-own-key connection (or the absence of one) in memory; connecting and disconnecting evict it on every edge at once through Redis. 0 disables the cache. */
    CONNECTION_CACHE_TTL_MS: z.coerce.number().int().min(0).max(3_600_000).default(10_000),
    /** How long the proxy trusts a public upstream host's DNS check; connections are still checked address by address when opened. */
    UPSTREAM_DNS_CACHE_MS: z.coerce.number().int().min(0).max(3_600_000).default(30_000),
    /** Retry-After (seconds) on 503 upstream_unavailable when the upstream gave none. */
    PROXY_RETRY_AFTER_SECONDS: z.coerce.number().int().min(1).max(3600).default(5),
    /** Let the proxy reach loopback/private/link-local upstreams. Tests only: production must keep it false. */
    ALLOW_PRIVATE_UPSTREAMS: envFlag.default(false),
    /**
     * Group commit: the charges that arrive together leave as one statement of up to this many (one
     * account once each); every call still waits for its own charge to commit. 1 charges each call alone.
     */
    CHARGE_BATCH_MAX: z.coerce.number().int().min(1).max(1_000).default(64),
    /** Charge statements one edge runs at once; charges arriving meanwhile join the next batch. */
    CHARGE_BATCH_CONCURRENCY: z.coerce.number().int().min(1).max(100).default(4),
    /**
     * Credit reservation (core billing's CreditReservations): a busy account's calls are charged from a
     * slice of its balance this edge holds, their ledger rows written in batches. false charges every call
     * synchronously.
     */
    CREDIT_RESERVATION: envFlag.default(true),
    /** Calls a second (on one edge) from which an account is served from a hold; quieter accounts are charged synchronously. */
    CREDIT_HOLD_MIN_CALLS_PER_SECOND: z.coerce.number().int().min(1).max(1_000_000).default(20),
    /** A hold is sized to this many seconds of the account's recent spend on the edge ... */
    CREDIT_HOLD_SLICE_SECONDS: z.coerce.number().min(0.1).max(60).default(1),
    /** ... at least this many dollars ... */
    CREDIT_HOLD_FLOOR_DOLLARS: dollars('0.01'),
    /** ... and at most this many (also the most a crashed edge keeps out of reach until its hold expires). */
    CREDIT_HOLD_CEILING_DOLLARS: dollars('5'),
    /** How often calls charged from holds are written to the ledger (ms). */
    CREDIT_HOLD_SETTLE_MS: z.coerce.number().int().min(10).max(10_000).default(200),
    /**
     * A hold's lifetime: its edge's settlements push its expiry to now + this once a quarter of it is
     * spent, so a hold whose edge stopped settling expires between three quarters of this and all of
     * it later; the queue workers then settle it from its usage events.
     */
    CREDIT_HOLD_TTL_SECONDS: z.coerce.number().int().min(5).max(3_600).default(30),
    /** A hold with no call for this long is settled and closed (ms). */
    CREDIT_HOLD_IDLE_MS: z.coerce.number().int().min(100).max(600_000).default(5_000),
    /** Usage events are handed to BullMQ in batches of up to this many ... */
    USAGE_BATCH_SIZE: z.coerce.number().int().min(1).max(5_000).default(500),
    /** ... or after this many milliseconds, whichever comes first. */
    USAGE_FLUSH_MS: z.coerce.number().int().min(5).max(60_000).default(250),
    /** How long handing one batch to Redis may take before it is written to Postgres directly. */
    USAGE_QUEUE_TIMEOUT_MS: z.coerce.number().int().min(50).max(60_000).default(2_000),
    /** Events held in memory while both Redis and Postgres refuse them; beyond this the oldest batch is logged and dropped. */
    USAGE_BUFFER_MAX: z.coerce.number().int().min(100).max(10_000_000).default(100_000),
    /** Cookbook session event streams: a comment line this often keeps proxies from closing idle streams. */
    SSE_HEARTBEAT_MS: z.coerce.number().int().min(100).max(300_000).default(15_000),
    /** Event streams one account may hold open across all edge instances; the next gets 429 with Retry-After. */
    SSE_MAX_STREAMS_PER_ACCOUNT: z.coerce.number().int().min(1).max(10_000).default(20),
    /**
     * Open streams are counted in Redis under a lease that the edge holding them renews; an edge that
     * dies stops renewing and its streams stop counting after this long.
     */
    SSE_STREAM_LEASE_SECONDS: z.coerce.number().int().min(3).max(3_600).default(30),
    /** How often the keys behind open streams are checked again (beside the change feed's push). */
    SSE_KEY_RECHECK_MS: z.coerce.number().int().min(100).max(300_000).default(5_000),
    /** A stream is closed after this long; the client resumes with Last-Event-ID (EventSource does so by itself). */
    SSE_MAX_LIFETIME_SECONDS: z.coerce.number().int().min(1).max(86_400).default(3_600),
    /**
     * Cookbook sessions one account may have active (running or waiting for a human) at once; the next
     * start gets 409 until one is finished or cancelled. Each is a workflow with timers that run for days.
     */
    SESSIONS_MAX_ACTIVE_PER_ACCOUNT: z.coerce.number().int().min(1).max(100_000).default(100),
    /** Test deliveries (POST /webhooks/{id}/test) one account may send in any hour; the next gets 429 with Retry-After. */
    WEBHOOK_TEST_DELIVERIES_PER_HOUR: z.coerce.number().int().min(1).max(10_000).default(30),
    /** Budget for starting a session workflow; past it (Temporal unreachable) the start answers 503. */
    TEMPORAL_START_TIMEOUT_MS: z.coerce.number().int().min(100).max(60_000).default(5_000),
    /** Budget for a step completion or cancellation to be applied by the workflow before answering 503. */
    TEMPORAL_UPDATE_TIMEOUT_MS: z.coerce.number().int().min(100).max(300_000).default(30_000),
    /**
     * Browser origins (host names, comma-separated) allowed to call the MCP endpoint; a request with
     * any other Origin gets 403. Empty: PUBLIC_URL's host only. Clients that are not browsers send no
     * Origin and are not affected.
     */
    MCP_ALLOWED_ORIGINS: z
      .string()
      .default('')
      .transform((text) =>
        text
          .split(',')
          .map((entry) => entry.trim().toLowerCase())
          .filter(Boolean),
      ),
    /** The MCP call_api tool returns at most this much of an upstream's body (bytes); the rest is cut and marked truncated. */
    MCP_CALL_API_MAX_BODY_BYTES: z.coerce
      .number()
      .int()
      .min(1024)
      .max(50 * 1024 * 1024)
      .default(1024 * 1024),
  });

export type EdgeSettings = z.output<typeof edgeSettings>;

export function loadEdgeSettings(env: NodeJS.ProcessEnv = process.env): EdgeSettings {
  const settings = parseSettings(edgeSettings, env);
  if (settings.NODE_ENV === 'production' && settings.SESSION_SECRET === edgeSettings.shape.SESSION_SECRET.parse(undefined)) {
    throw new Error('SESSION_SECRET must be set to a secret of at least 32 characters in production');
  }
  if (settings.NODE_ENV === 'production' && isDevMasterKey(settings.CONNECTIONS_MASTER_KEY)) {
    throw new Error('CONNECTIONS_MASTER_KEY must be set to 32 random bytes (openssl rand -hex 32) in production');
  }
  if (settings.NODE_ENV === 'production' && isDevCodecKeys(settings.TEMPORAL_CODEC_KEYS)) {
    throw new Error('TEMPORAL_CODEC_KEYS must be set to your own key in production (id:64 hex digits; openssl rand -hex 32): the default is public');
  }
  if (settings.NODE_ENV === 'production' && settings.ALLOW_PRIVATE_UPSTREAMS) {
    throw new Error('ALLOW_PRIVATE_UPSTREAMS=true is for tests only: in production the proxy must not reach private or loopback addresses');
  }
  return settings;
}
