/**
 * "Can I call this?": each API's state for a caller (docs/decisions/callability-states.md).
 *
 * The part that depends on no account (the auth scheme, the operator's platform keys and OAuth apps)
 * is held in memory per process (CallabilityCatalog: one query of about 2,600 short rows, reloaded
 * when the catalog changes). The part that depends on the caller (its own keys, its own OAuth apps,
 * its OAuth connections, an agent key's allow-list) is one small indexed query per authenticated
 * request (loadCallerAccess). A state is then a function of the two, with no query per API.
 */
import { createHash } from 'node:crypto';
import type { Callability, CallabilityReason, CallabilityState } from '#contracts/directory';
import { loadAccountAccess, loadApiAccess, loadApiAccessOf, type ApiAccessRow } from '#db/callability';
import type { Db, Sql } from '#db/sql';

/** The auth schemes the gateway sends upstream (gateway upstream.ts upstreamAuth). */
const CARRIED_SCHEMES = new Set(['none', 'apiKey', 'bearer', 'basic', 'oauth2']);
/**
 * OAuth 2 flows the platform can run: authorization code (with PKCE), implicit (run as authorization
 * code with PKCE, as RFC 9700 asks) and client credentials. The password flow is not one of them.
 */
const USABLE_FLOWS = new Set(['authorizationCode', 'implicit', 'clientCredentials']);

/** What the caller holds that changes states. Plain arrays: it crosses to ranking worker threads as is. */
export interface CallerAccess {
  /** API ids the account connected its own key for. */
  keyApis: string[];
  /** Providers the account registered its own OAuth app for. */
  ownAppProviders: string[];
  /** Providers the account has a ready OAuth connection for. */
  oauthReady: string[];
  /** Providers whose OAuth connections all need a person to sign in again. */
  oauthReauth: string[];
  /** An agent key's allow-list, or null for any API. */
  allowedApis: string[] | null;
  /**
   * '' when nothing here changes any state (the answer is then the anonymous one, and shares its
   * cache); else a digest of the contents, so equal holdings share cached answers and no other.
   */
  fingerprint: string;
}

/** A caller that holds nothing: anonymous callers, and accounts with no connection. */
export const NO_ACCESS: CallerAccess = { keyApis: [], ownAppProviders: [], oauthReady: [], oauthReauth: [], allowedApis: null, fingerprint: '' };

interface CallerSets {
  keyApis: ReadonlySet<string>;
  ownApps: ReadonlySet<string>;
  oauthReady: ReadonlySet<string>;
  oauthReauth: ReadonlySet<string>;
  allowed: ReadonlySet<string> | null;
}
const callerSets = new WeakMap<CallerAccess, CallerSets>();
function setsOf(caller: CallerAccess): CallerSets {
  let sets = callerSets.get(caller);
  if (!sets) {
    sets = {
      keyApis: new Set(caller.keyApis),
      ownApps: new Set(caller.ownAppProviders),
      oauthReady: new Set(caller.oauthReady),
      oauthReauth: new Set(caller.oauthReauth),
      allowed: caller.allowedApis === null ? null : new Set(caller.allowedApis),
    };
    callerSets.set(caller, sets);
  }
  return sets;
}

/** The caller's holdings from its rows (db loadAccountAccess) and its key's allow-list. */
export function callerAccessOf(
  rows: { kind: string; name: string; status: string | null; is_default: boolean | null }[],
  allowedApis: readonly string[] | null,
): CallerAccess {
  const keyApis = new Set<string>();
  const ownApps = new Set<string>();
  const ready = new Set<string>();
  const reauth = new Set<string>();
  for (const row of rows) {
    if (row.kind === 'key') keyApis.add(row.name);
    else if (row.kind === 'app') ownApps.add(row.name);
    else if (row.status === 'ready') ready.add(row.name);
    else reauth.add(row.name);
  }
  // A provider with one ready connection is callable (a call can pick it by label); it needs a
  // person again only when none is ready.
  for (const provider of ready) reauth.delete(provider);
  const sorted = (set: Set<string>) => [...set].sort();
  const access = {
    keyApis: sorted(keyApis),
    ownAppProviders: sorted(ownApps),
    oauthReady: sorted(ready),
    oauthReauth: sorted(reauth),
    allowedApis: allowedApis === null ? null : [...new Set(allowedApis)].sort(),
  };
  const empty = rows.length === 0 && access.allowedApis === null;
  return { ...access, fingerprint: empty ? '' : createHash('sha256').update(JSON.stringify(access)).digest('base64url').slice(0, 22) };
}

/** One caller's holdings: one query over its connections, OAuth apps and OAuth connections. */
export async function loadCallerAccess(db: Db, caller: { accountId: string; allowedApis: readonly string[] | null } | null): Promise<CallerAccess> {
  if (caller === null) return NO_ACCESS;
  return callerAccessOf(await loadAccountAccess(db, caller.accountId), caller.allowedApis);
}

/** An API's access facts as the catalog holds them. */
export interface ApiAccess {
  id: string;
  authType: string;
  platformKey: boolean;
  provider: string | null;
  flows: readonly string[] | null;
  keyDocsUrl: string | null;
}

export const apiAccessOf = (row: ApiAccessRow): ApiAccess => ({
  id: row.id,
  authType: row.auth_type,
  platformKey: row.platform_key,
  provider: row.oauth_provider,
  flows: row.oauth_flows,
  keyDocsUrl: row.key_docs_url,
});

const SCHEME_WORDS: Record<string, string> = { apiKey: 'API key', bearer: 'bearer token', basic: 'basic credentials (user:password)' };
const CONNECTIONS_PAGE = "the dashboard's Connections page";

function state(s: CallabilityState, reason: CallabilityReason, extra: Omit<Callability, 'state' | 'reason'> = {}): Callability {
  return { state: s, reason, ...extra };
}

/**
 * An API's state for a caller (NO_ACCESS for anonymous callers). `operatorProviders`: the providers
 * the operator registered an OAuth app for. The rules, first match wins, are in
 * docs/decisions/callability-states.md.
 */
export function callabilityOf(api: ApiAccess, operatorProviders: ReadonlySet<string>, caller: CallerAccess = NO_ACCESS): Callability {
  const sets = caller === NO_ACCESS ? null : setsOf(caller);
  const id = api.id;
  if (sets?.allowed && !sets.allowed.has(id)) {
    return state('unavailable', 'key_not_allowed', {
      hint: `This agent key may call only the APIs on its allow-list, and ${id} is not one of them; the account's owner can issue a key that allows it (POST /api/v1/agent-keys).`,
    });
  }
  const type = api.authType;
  if (type === 'none') return state('ready', 'no_auth');
  if (!CARRIED_SCHEMES.has(type)) {
    return state('unavailable', 'unsupported_scheme', {
      hint: `Its description asks for "${type}" authentication, which the gateway cannot send upstream.`,
    });
  }
  if (sets?.keyApis.has(id)) return state('ready', 'own_key');
  if (api.platformKey) return state('ready', 'platform_key');
  if (type !== 'oauth2') {
    const what = SCHEME_WORDS[type] ?? 'key';
    const where = api.keyDocsUrl ? ` Get one from ${api.keyDocsUrl}.` : '';
    return state('needs_key', 'key_required', {
      hint: `Connect your own ${what} once with POST /api/v1/connect/${id} {"apiKey": "..."} (or from ${CONNECTIONS_PAGE}); the proxy then sends it on every call. An agent can ask a person to with POST /api/v1/connect/${id}/request (MCP: request_connection).${where}`,
      ...(api.keyDocsUrl ? { keyDocsUrl: api.keyDocsUrl } : {}),
    });
  }
  const provider = api.provider;
  const withProvider = provider ? { provider } : {};
  if (provider && sets?.oauthReady.has(provider)) return state('ready', 'oauth_connection', withProvider);
  if (api.flows === null) {
    return state('unavailable', 'oauth_not_described', {
      hint: 'It uses OAuth 2, but its description declares no OAuth flow the platform can run (none, or only the password flow), so no one can connect it.',
      ...withProvider,
    });
  }
  if (!provider) {
    // The importer keeps the flows of a description whose authorization server is a placeholder
    // (authserver.example, a host with braces) but names no provider: no app can be registered for it.
    return state('unavailable', 'placeholder_provider', {
      hint: 'Its description names a placeholder authorization server (an example or template host), so no OAuth app can be registered for it.',
    });
  }
  if (!api.flows.some((flow) => USABLE_FLOWS.has(flow))) {
    return state('unavailable', 'oauth_flow_unsupported', {
      hint: `It declares only the OAuth 2 flows ${api.flows.map((f) => `"${f}"`).join(', ') || '(none)'}; the platform runs authorization code (with PKCE) and client credentials.`,
      ...withProvider,
    });
  }
  const own = sets?.ownApps.has(provider) ?? false;
  if (!own && !operatorProviders.has(provider)) {
    return state('unavailable', 'no_oauth_app', {
      hint: `It uses OAuth 2 and no OAuth app is registered for ${provider}: the operator can register one (operator CLI), or an account can bring its own app for ${provider}.`,
      ...withProvider,
    });
  }
  const ask = `an agent can ask a person to with POST /api/v1/connect/${id}/request {"purpose": "..."} (MCP: request_connection)`;
  if (sets?.oauthReauth.has(provider)) {
    return state('needs_oauth', 'reauth_required', {
      hint: `Your ${provider} connection needs a person to sign in again: reconnect it from ${CONNECTIONS_PAGE}; ${ask}.`,
      ...withProvider,
    });
  }
  return state('needs_oauth', own ? 'own_oauth_app' : 'oauth_app', {
    hint: `Connect ${provider} once with OAuth from ${CONNECTIONS_PAGE} (one sign-in and consent); ${ask}.`,
    ...withProvider,
  });
}

/** True when the caller's holdings may change this API's state (its anonymous state is not the answer). */
function touches(api: ApiAccess, sets: CallerSets): boolean {
  if (sets.allowed !== null || sets.keyApis.has(api.id)) return true;
  const provider = api.provider;
  return provider !== null && (sets.ownApps.has(provider) || sets.oauthReady.has(provider) || sets.oauthReauth.has(provider));
}

/** The access facts of every API and the operator's OAuth providers, as read at one moment. */
export class AccessSnapshot {
  private readonly byId: Map<string, ApiAccess>;
  /** Each API's anonymous state as JSON, rendered on first use. */
  private readonly baseJson = new Map<string, string>();
  private readonly baseStates = new Map<string, Callability>();
  private anonymousReady: string[] | null = null;
  private anonymousReadySet: ReadonlySet<string> | null = null;
  /** A digest of what the states depend on: answers cached under it are never served after a change. */
  readonly version: string;

  constructor(
    apis: ApiAccess[],
    readonly operatorProviders: ReadonlySet<string>,
  ) {
    this.byId = new Map(apis.map((api) => [api.id, api]));
    const digest = createHash('sha256');
    for (const api of apis) digest.update(JSON.stringify(api));
    digest.update(JSON.stringify([...operatorProviders].sort()));
    this.version = digest.digest('base64url').slice(0, 16);
  }

  get size(): number {
    return this.byId.size;
  }

  /** The same APIs with another set of operator providers. */
  withOperatorProviders(providers: ReadonlySet<string>): AccessSnapshot {
    return new AccessSnapshot([...this.byId.values()], providers);
  }

  facts(id: string): ApiAccess | undefined {
    return this.byId.get(id);
  }

  /** The API's state for the caller; null for an API the snapshot does not hold (added since it was read). */
  of(id: string, caller: CallerAccess = NO_ACCESS): Callability | null {
    const api = this.byId.get(id);
    if (!api) return null;
    if (caller.fingerprint !== '' && touches(api, setsOf(caller))) return callabilityOf(api, this.operatorProviders, caller);
    let base = this.baseStates.get(id);
    if (!base) this.baseStates.set(id, (base = callabilityOf(api, this.operatorProviders)));
    return base;
  }

  /** The state as JSON text (an answer's `callability`), memoized for the anonymous states. */
  json(id: string, caller: CallerAccess = NO_ACCESS): string | null {
    const api = this.byId.get(id);
    if (!api) return null;
    if (caller.fingerprint !== '' && touches(api, setsOf(caller))) return JSON.stringify(callabilityOf(api, this.operatorProviders, caller));
    let text = this.baseJson.get(id);
    if (text === undefined) this.baseJson.set(id, (text = JSON.stringify(this.of(id))));
    return text;
  }

  /** readyIds as a set (kept for anonymous callers). */
  readySet(caller: CallerAccess = NO_ACCESS): ReadonlySet<string> {
    if (caller.fingerprint === '') return (this.anonymousReadySet ??= new Set(this.readyIds()));
    return new Set(this.readyIds(caller));
  }

  /** The ids of the APIs the caller can call now (`callable=true`), in the catalog's id order. */
  readyIds(caller: CallerAccess = NO_ACCESS): string[] {
    if (caller.fingerprint === '') {
      this.anonymousReady ??= [...this.byId.keys()].filter((id) => this.of(id)!.state === 'ready');
      return this.anonymousReady;
    }
    return [...this.byId.keys()].filter((id) => this.of(id, caller)!.state === 'ready');
  }
}

/** Where the catalog reports trouble (a pino/Fastify logger fits). */
export interface CatalogLog {
  warn(object: Record<string, unknown>, message: string): void;
}

/** How often the operator's OAuth providers are read again (they change with the operator CLI, rarely). */
const PROVIDERS_MAX_AGE_MS = 5_000;
/** How long a snapshot serves without any notification (a missed one, or LISTEN down). */
const SNAPSHOT_MAX_AGE_MS = 60_000;
/** After a failed read, how long the previous snapshot answers before the next try. */
const RETRY_MS = 2_000;

/**
 * The access facts of the catalog in one process (the edge, a ranking worker), loaded on first use.
 * A change to `apis` (a platform key set, a re-import) notifies `directory_changed` (migration 00007)
 * and the next read reloads; the operator's OAuth providers are read again at most every five
 * seconds; any snapshot is reloaded after a minute regardless.
 */
export class CallabilityCatalog {
  private current: { snapshot: AccessSnapshot; loadedAt: number; providersAt: number } | null = null;
  private pending: Promise<AccessSnapshot> | null = null;
  private stale = false;
  /** After a failed read, the previous snapshot answers until then. */
  private retryAfter = 0;
  private unlisten: (() => Promise<void>) | null = null;
  private listening: Promise<void> | null = null;

  constructor(
    private readonly db: Db,
    private readonly log?: CatalogLog,
  ) {}

  /** The current snapshot, reloaded first when it is out of date. */
  snapshot(): AccessSnapshot | Promise<AccessSnapshot> {
    const now = Date.now();
    const current = this.current;
    if (
      current &&
      (now < this.retryAfter || (!this.stale && now - current.loadedAt < SNAPSHOT_MAX_AGE_MS && now - current.providersAt < PROVIDERS_MAX_AGE_MS))
    ) {
      return current.snapshot;
    }
    this.pending ??= this.refresh(current, now)
      .then(
        (snapshot) => {
          this.retryAfter = 0;
          return snapshot;
        },
        (error: unknown) => {
          // Postgres away: the facts read last keep answering (search and discovery answer from memory
          // too) and the read is retried after RETRY_MS; with nothing read yet, the request fails.
          if (!current) throw error;
          this.log?.warn({ err: error }, 'callability: reloading the access facts failed; answering from the previous ones');
          this.retryAfter = Date.now() + RETRY_MS;
          return current.snapshot;
        },
      )
      .finally(() => {
        this.pending = null;
      });
    return this.pending;
  }

  private async refresh(previous: CallabilityCatalog['current'], now: number): Promise<AccessSnapshot> {
    this.listening ??= this.listen();
    await this.listening;
    if (previous && !this.stale && now - previous.loadedAt < SNAPSHOT_MAX_AGE_MS) {
      // Only the operator's providers are due: a tiny query, and a new snapshot only when they moved.
      const rows = await this.db<{ provider: string }[]>`select provider from oauth_apps where account_id is null`;
      const providers = new Set(rows.map((r) => r.provider));
      const same =
        providers.size === previous.snapshot.operatorProviders.size && [...providers].every((p) => previous.snapshot.operatorProviders.has(p));
      const snapshot = same ? previous.snapshot : previous.snapshot.withOperatorProviders(providers);
      this.current = { snapshot, loadedAt: previous.loadedAt, providersAt: Date.now() };
      return snapshot;
    }
    this.stale = false;
    let loaded: Awaited<ReturnType<typeof loadApiAccess>>;
    try {
      loaded = await loadApiAccess(this.db);
    } catch (error) {
      this.stale = true;
      throw error;
    }
    const { apis, operatorProviders } = loaded;
    const snapshot = new AccessSnapshot(apis.map(apiAccessOf), new Set(operatorProviders));
    const at = Date.now();
    this.current = { snapshot, loadedAt: at, providersAt: at };
    return snapshot;
  }

  private async listen(): Promise<void> {
    if (!('listen' in this.db)) return;
    try {
      const subscription = await (this.db as Sql).listen(
        'directory_changed',
        (payload) => {
          if (payload === 'apis') this.stale = true;
        },
        // Called again after a reconnect: notifications may have been missed meanwhile.
        () => {
          if (this.current) this.stale = true;
        },
      );
      this.unlisten = () => subscription.unlisten();
    } catch (error) {
      this.log?.warn({ err: error }, 'callability: LISTEN failed; API states follow catalog changes within a minute');
    }
  }

  /**
   * A snapshot holding every one of `ids` that exists: one read at once when the current snapshot
   * misses some (an API added since it was read, whose notification may still be on its way).
   */
  async snapshotHolding(ids: readonly string[]): Promise<AccessSnapshot> {
    const snapshot = await this.snapshot();
    if (ids.every((id) => snapshot.facts(id) !== undefined)) return snapshot;
    this.stale = true;
    return this.snapshot();
  }

  /** The states of some APIs for a caller (unknown ids are left out); reads the ones the snapshot misses. */
  async statesOf(ids: readonly string[], caller: CallerAccess = NO_ACCESS): Promise<Map<string, Callability>> {
    const snapshot = await this.snapshot();
    const out = new Map<string, Callability>();
    const missing: string[] = [];
    for (const id of ids) {
      const s = snapshot.of(id, caller);
      if (s) out.set(id, s);
      else missing.push(id);
    }
    for (const row of await loadApiAccessOf(this.db, missing)) out.set(row.id, callabilityOf(apiAccessOf(row), snapshot.operatorProviders, caller));
    return out;
  }

  /** Stops following changes. */
  async close(): Promise<void> {
    await this.listening?.catch(() => {});
    await this.unlisten?.().catch(() => {});
    this.unlisten = null;
  }
}
