import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import {
  apiOAuthSchema,
  getMeteredApi,
  insertOperatorApi,
  listMeteredApis,
  publishApiChange,
  removeOperatorApi,
  setPlatformKey,
  updateApi,
  type ApiOAuth,
  type AuthScheme,
  type MeteredApi,
  type PricingRule,
} from '#db/metered-apis';
import { formatDollars, parseDollars } from '#contracts/money';
import { masterKeySetting, platformKeyContext, sealSecret } from '#core/platform';
import { parseSettings, sharedSettings } from '#core/platform';
import { createRedis } from '#core/platform';
import { createSql } from '#db/sql';
import { connectionChangesChannel } from '#db/connections';
import { API_ID_PATTERN as API_ID } from '#contracts/directory';
import { oauthProviderOf } from '#core/directory';
import { envFlag, PlatformError } from '#core/platform';
import { listOAuthAppViews, OAuthClients, registerOAuthApp, removeOAuthApp, type OAuthAppView } from '#core/oauth';

export const USAGE = `Operator tool for the directory's metered APIs.

  npm run api -- add --id ID --name NAME --base-url URL --price DOLLARS [--auth SCHEME]
                     [--platform-key KEY] [--byok-price DOLLARS] [--rule "METHOD PATH=DOLLARS"]...
                     [--provider NAME] [--category NAME]... [--description TEXT] [--key-docs-url URL]
                     [OAUTH]
  npm run api -- update --id ID [--name ...] [--base-url ...] [--price ...] [--auth ...]
                     [--byok-price DOLLARS|none] [--rule ...]... [--clear-rules]
                     [--key-docs-url URL|none] [OAUTH | --clear-oauth]
  npm run api -- set-key --id ID --key KEY        (or --clear; the key can also come from PLATFORM_KEY)
  npm run api -- list [--all]                     (operator APIs; --all includes the imported catalog)
  npm run api -- show --id ID
  npm run api -- remove --id ID                   (operator APIs only: an imported one is refused; its connections go too)
  npm run api -- oauth-app set --provider HOST --client-id ID (--client-secret-stdin | --client-secret-file PATH | --public)
                     (--authorization-url URL --token-url URL [--revocation-url URL] [--issuer URL] | --issuer URL)
                     [--scope SCOPE]... [--param NAME=VALUE]... [--token-auth basic|post]
  npm run api -- oauth-app list                   (the operator's OAuth apps; never their secrets)
  npm run api -- oauth-app remove --provider HOST

SCHEME is none | bearer | basic | oauth2 | header:NAME | query:NAME (default none).
A rule prices one method and path: "POST /messages*=0.005" (a trailing * matches any remainder;
METHOD may be *). Prices are dollars with up to six decimals. Keys are stored AES-256-GCM under
CONNECTIONS_MASTER_KEY and never printed.

OAUTH describes an OAuth 2 API (its auth becomes oauth2) whose tokens an OAuth app registered for
its provider obtains:
  --oauth-authorization-url URL --oauth-token-url URL   the authorization code flow
  --oauth-token-url URL (alone, or with --oauth-client-credentials)   the client credentials flow
  [--oauth-refresh-url URL] [--oauth-scopes a,b,c] [--oauth-provider HOST]
or --oauth-file FILE: a JSON description {"flows": {"authorizationCode": {"authorizationUrl",
"tokenUrl"}, "clientCredentials": {"tokenUrl"}, "implicit": {"authorizationUrl"}}, "scopes":
{"name": "description"}}. URLs are https (http only on a loopback host, for local providers).
The provider (the key of the OAuth app that serves the API) is the authorization URL's host,
else the token URL's, unless --oauth-provider names it.


An OAuth app makes every API whose tokens HOST issues (apis.oauth_provider, the authorization server's
host) connectable by every account. Its redirect URI at the provider is PUBLIC_URL/api/v1/oauth/callback.
--issuer alone reads the endpoints from the issuer's discovery document. --scope is asked for on every
consent (e.g. offline_access); --param adds an authorization request parameter (e.g. access_type=offline).
The client secret is read from standard input or a file, never from the command line, and stored
AES-256-GCM under CONNECTIONS_MASTER_KEY.`;

export class CliError extends Error {
  override name = 'CliError';
}

function dollars(value: string, flag: string): bigint {
  const micros = parseDollars(value);
  if (micros === null) throw new CliError(`${flag} must be a dollar amount with at most six decimals, got "${value}"`);
  return micros;
}

export function parseAuth(value: string): AuthScheme {
  const [kind, name] = value.split(/:(.*)/s) as [string, string | undefined];
  switch (kind) {
    case 'none':
    case 'bearer':
    case 'basic':
    case 'oauth2':
      if (name) break;
      return { type: kind };
    case 'header':
    case 'query':
    case 'cookie':
      if (!name || !/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,200}$/.test(name)) throw new CliError(`--auth ${kind}:NAME needs a header or parameter name`);
      return { type: 'apiKey', in: kind, name };
  }
  throw new CliError(`--auth must be none, bearer, basic, oauth2, header:NAME, query:NAME or cookie:NAME, got "${value}"`);
}

function parseRule(value: string): PricingRule {
  const match = /^\s*(\*|[A-Za-z]+)\s+(\/\S*)\s*=\s*(\S+)\s*$/.exec(value);
  if (!match) throw new CliError(`--rule must look like "POST /messages*=0.005", got "${value}"`);
  return { method: match[1]!.toUpperCase(), path: match[2]!, priceMicros: dollars(match[3]!, '--rule price') };
}

function baseUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`--base-url must be an absolute http(s) URL, got "${value}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError('--base-url must use http or https');
  if (url.username || url.password || url.search || url.hash) throw new CliError('--base-url may not carry credentials, a query or a fragment');
  return url.toString().replace(/\/+$/, '');
}

/** An https URL, or http on a loopback host (a provider run locally, as the tests' oidc-provider is). */
function oauthUrl(value: string, flag: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`${flag} must be an absolute https URL, got "${value}"`);
  }
  const host = url.hostname.replace(/^\[|\]$/g, '');
  const loopback = host === 'localhost' || host === '::1' || (isIP(host) === 4 && host.startsWith('127.'));
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback))
    throw new CliError(`${flag} must use https (http only on a loopback host)`);
  if (url.username || url.password || url.hash) throw new CliError(`${flag} may not carry credentials or a fragment`);
  return url.toString();
}

const OAUTH_FLAGS = ['oauth-authorization-url', 'oauth-token-url', 'oauth-refresh-url', 'oauth-scopes', 'oauth-client-credentials'] as const;
const PROVIDER_KEY = /^[a-z0-9]([a-z0-9.-]{0,251}[a-z0-9])?(:\d{1,5})?$/;

/**
 * The OAuth description the flags give (null when they give none) and its provider key. Every URL
 * is checked as `oauthUrl` checks it, those of a file too.
 */
export function parseOAuth(values: {
  'oauth-authorization-url'?: string | undefined;
  'oauth-token-url'?: string | undefined;
  'oauth-refresh-url'?: string | undefined;
  'oauth-scopes'?: string | undefined;
  'oauth-client-credentials'?: boolean | undefined;
  'oauth-file'?: string | undefined;
  'oauth-provider'?: string | undefined;
}): { oauth: ApiOAuth; provider: string } | null {
  const flagged = OAUTH_FLAGS.filter((f) => values[f] !== undefined);
  let oauth: ApiOAuth;
  if (values['oauth-file'] !== undefined) {
    if (flagged.length) throw new CliError(`--oauth-file describes the whole OAuth description; leave out --${flagged.join(', --')}`);
    let raw: unknown;
    try {
      raw = JSON.parse(readFileSync(values['oauth-file'], 'utf8'));
    } catch (error) {
      throw new CliError(`--oauth-file: cannot read JSON from ${values['oauth-file']}: ${(error as Error).message}`);
    }
    const parsed = apiOAuthSchema.strict().safeParse(raw);
    if (!parsed.success) throw new CliError(`--oauth-file: not an OAuth description: ${z.prettifyError(parsed.error)}`);
    oauth = parsed.data;
    const { authorizationCode: code, clientCredentials: client, implicit } = oauth.flows;
    for (const [flag, url] of [
      ['authorizationCode.authorizationUrl', code?.authorizationUrl],
      ['authorizationCode.tokenUrl', code?.tokenUrl],
      ['authorizationCode.refreshUrl', code?.refreshUrl],
      ['clientCredentials.tokenUrl', client?.tokenUrl],
      ['clientCredentials.refreshUrl', client?.refreshUrl],
      ['implicit.authorizationUrl', implicit?.authorizationUrl],
    ] as const)
      if (url !== undefined) oauthUrl(url, `--oauth-file ${flag}`);
  } else if (flagged.length) {
    const authorizationUrl = values['oauth-authorization-url'] && oauthUrl(values['oauth-authorization-url'], '--oauth-authorization-url');
    const tokenUrl = values['oauth-token-url'] && oauthUrl(values['oauth-token-url'], '--oauth-token-url');
    const refreshUrl = values['oauth-refresh-url'] && oauthUrl(values['oauth-refresh-url'], '--oauth-refresh-url');
    if (!tokenUrl) throw new CliError('--oauth-token-url is required with the other --oauth-* options (or give --oauth-file)');
    const refresh = refreshUrl ? { refreshUrl } : {};
    oauth = { flows: {}, scopes: {} };
    if (authorizationUrl) oauth.flows.authorizationCode = { authorizationUrl, tokenUrl, ...refresh };
    if (!authorizationUrl || values['oauth-client-credentials']) oauth.flows.clientCredentials = { tokenUrl, ...refresh };
    for (const scope of (values['oauth-scopes'] ?? '').split(',').map((s) => s.trim())) {
      if (!scope) continue;
      if (!/^[\x21-\x7e]{1,300}$/.test(scope) || scope.includes('"') || scope.includes('\\'))
        throw new CliError(`--oauth-scopes: "${scope}" is not a scope name (RFC 6749: printable characters, no spaces, quotes or backslashes)`);
      oauth.scopes[scope] = '';
    }
  } else {
    if (values['oauth-provider'] !== undefined)
      throw new CliError('--oauth-provider names the provider of an OAuth description: give its URLs or --oauth-file too');
    return null;
  }
  const provider = values['oauth-provider']?.toLowerCase() ?? oauthProviderOf(oauth, { rejectPlaceholders: false });
  if (!provider || !PROVIDER_KEY.test(provider))
    throw new CliError(`--oauth-provider must be a host name (with a port if any), got "${provider ?? ''}"`);
  return { oauth, provider };
}

function keyDocsUrl(value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new CliError(`--key-docs-url must be an absolute https URL, got "${value}"`);
  }
  if (url.protocol !== 'https:' || url.username || url.password) throw new CliError('--key-docs-url must be an https URL without credentials');
  return url.toString();
}

function describe(api: MeteredApi) {
  return {
    id: api.id,
    name: api.name,
    baseUrl: api.baseUrl,
    auth: api.authScheme,
    price: formatDollars(api.priceMicros),
    byokPrice: api.byokPriceMicros === null ? null : formatDollars(api.byokPriceMicros),
    rules: api.pricingRules.map((r) => `${r.method ?? '*'} ${r.path}=${formatDollars(r.priceMicros)}`),
    ...(api.oauth ? { oauth: { provider: api.oauthProvider, flows: api.oauth.flows, scopes: Object.keys(api.oauth.scopes) } } : {}),
    ...(api.keyDocsUrl ? { keyDocsUrl: api.keyDocsUrl } : {}),
    platformKey: api.platformKeyEncrypted ? 'set' : 'none',
    source: api.source,
  };
}

const cliSettings = sharedSettings
  .pick({ DATABASE_URL: true, REDIS_URL: true, REDIS_PREFIX: true, PUBLIC_URL: true })
  // ALLOW_PRIVATE_UPSTREAMS (tests only): discovery may read a loopback issuer over plain http.
  .extend({ CONNECTIONS_MASTER_KEY: masterKeySetting, ALLOW_PRIVATE_UPSTREAMS: envFlag.default(false) });

/** Where the CLI reads what it must not take from the command line (a client secret). */
export interface CliInput {
  readStdin?: () => Promise<string>;
  readFile?: (path: string) => Promise<string>;
}

const describeApp = (app: OAuthAppView) => ({
  provider: app.provider,
  clientId: app.clientId,
  clientSecret: app.hasClientSecret ? 'set' : 'none (public client)',
  authorizationUrl: app.authorizationUrl,
  tokenUrl: app.tokenUrl,
  revocationUrl: app.revocationUrl,
  issuer: app.issuer,
  scopes: app.defaultScopes,
  params: app.authorizationParams,
  tokenAuth: app.tokenAuthMethod,
  updatedAt: app.updatedAt.toISOString(),
});

function parseParam(value: string): [string, string] {
  const at = value.indexOf('=');
  if (at <= 0) throw new CliError(`--param must look like NAME=VALUE, got "${value}"`);
  return [value.slice(0, at), value.slice(at + 1)];
}

/**
 * Tells every running edge to drop its cached copy of a changed API row (see packages/core/directory/api-cache.ts);
 * with `connections`, also every cached bring-your-own-key connection (a removed API's connections are gone: none
 * may reach an API re-added under its id). Returns a note for the output when Redis could not be told: the edges
 * then see it when their copy expires.
 */
async function announceChange(
  settings: { REDIS_URL: string; REDIS_PREFIX: string },
  id: string,
  options: { connections?: boolean } = {},
): Promise<string> {
  const redis = createRedis(settings.REDIS_URL, 'request-path', {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  try {
    await redis.connect();
    await publishApiChange(redis, settings.REDIS_PREFIX, id);
    // '*' empties the edges' connection caches (entries are by account and API; a removal names no account).
    if (options.connections) await redis.publish(connectionChangesChannel(settings.REDIS_PREFIX), '*');
    return '';
  } catch {
    return ' (Redis unreachable: running edges pick the change up when their cached copy expires, API_CACHE_TTL_MS)';
  } finally {
    redis.disconnect();
  }
}

/**
 * Runs one operator command; returns what it prints. Throws CliError for bad usage. Tests call this
 * directly; `apps/cli/api.ts` is the process entry behind `npm run api`.
 */
export async function runApiCli(argv: string[], env: NodeJS.ProcessEnv = process.env, input: CliInput = {}): Promise<string> {
  const [command, ...rest] = argv;
  if (command === 'oauth-app') return runOAuthAppCli(rest, env, input);
  if (!command || command === 'help' || command === '--help') return USAGE;
  const { values } = (() => {
    try {
      return parseArgs({
        args: rest,
        strict: true,
        options: {
          id: { type: 'string' },
          name: { type: 'string' },
          'base-url': { type: 'string' },
          price: { type: 'string' },
          auth: { type: 'string' },
          'platform-key': { type: 'string' },
          'byok-price': { type: 'string' },
          rule: { type: 'string', multiple: true },
          'clear-rules': { type: 'boolean' },
          provider: { type: 'string' },
          'oauth-provider': { type: 'string' },
          category: { type: 'string', multiple: true },
          description: { type: 'string' },
          'key-docs-url': { type: 'string' },
          'oauth-authorization-url': { type: 'string' },
          'oauth-token-url': { type: 'string' },
          'oauth-refresh-url': { type: 'string' },
          'oauth-scopes': { type: 'string' },
          'oauth-client-credentials': { type: 'boolean' },
          'oauth-file': { type: 'string' },

          'clear-oauth': { type: 'boolean' },
          key: { type: 'string' },
          clear: { type: 'boolean' },
          all: { type: 'boolean' },
        },
      });
    } catch (error) {
      throw new CliError((error as Error).message);
    }
  })();
  const settings = parseSettings(cliSettings, env);
  const sql = createSql(settings.DATABASE_URL, { max: 2, appName: 'api-cli' });
  const requireId = () => {
    if (!values.id || !API_ID.test(values.id)) throw new CliError('--id is required: lowercase letters, digits, ".", "_", "-" (at most 200)');
    return values.id;
  };
  const sealKey = (id: string, key: string) => {
    if (key.trim() === '') throw new CliError('the platform key is empty');
    return sealSecret(settings.CONNECTIONS_MASTER_KEY, key, platformKeyContext(id));
  };
  /** The OAuth description of the flags, and the auth scheme with it: oauth2 unless --auth says otherwise (refused). */
  const oauthOf = () => {
    const described = parseOAuth(values);
    if (described && values['clear-oauth']) throw new CliError('--clear-oauth removes the OAuth description: leave out the --oauth-* options');
    if (described && values.auth !== undefined && values.auth !== 'oauth2')
      throw new CliError('--oauth-* describe an OAuth 2 API: use --auth oauth2 or leave --auth out');
    return described;
  };
  try {
    switch (command) {
      case 'add': {
        const id = requireId();
        if (!values.name || !values['base-url'] || !values.price) throw new CliError('add needs --id, --name, --base-url and --price');
        if (values['clear-oauth']) throw new CliError('--clear-oauth is for update');
        const oauth = oauthOf();
        const docs = values['key-docs-url'] === undefined ? null : keyDocsUrl(values['key-docs-url']);
        const created = await sql.begin(async (tx) => {
          const inserted = await insertOperatorApi(tx, {
            id,
            name: values.name!,
            provider: values.provider,
            baseUrl: baseUrl(values['base-url']!),
            authScheme: parseAuth(values.auth ?? (oauth ? 'oauth2' : 'none')),
            oauth: oauth?.oauth ?? null,
            oauthProvider: oauth?.provider ?? null,
            keyDocsUrl: docs,
            priceMicros: dollars(values.price!, '--price'),
            byokPriceMicros: values['byok-price'] ? dollars(values['byok-price'], '--byok-price') : null,
            pricingRules: (values.rule ?? []).map(parseRule),
            categories: values.category ?? [],
            description: values.description ?? '',
          });
          if (inserted && values['platform-key'] !== undefined) await setPlatformKey(tx, id, sealKey(id, values['platform-key']));
          return inserted;
        });
        if (!created) throw new CliError(`API ${id} already exists; use update`);
        return `added ${JSON.stringify(describe((await getMeteredApi(sql, id))!))}${await announceChange(settings, id)}`;
      }
      case 'update': {
        const id = requireId();
        const byok = values['byok-price'];
        const oauth = oauthOf();
        const docs = values['key-docs-url'];
        const updated = await sql.begin(async (tx) => {
          const ok = await updateApi(tx, id, {
            name: values.name,
            baseUrl: values['base-url'] ? baseUrl(values['base-url']) : undefined,
            authScheme: values.auth ? parseAuth(values.auth) : oauth ? { type: 'oauth2' } : undefined,
            oauth: oauth ?? (values['clear-oauth'] ? null : undefined),
            keyDocsUrl: docs === undefined ? undefined : docs === 'none' ? null : keyDocsUrl(docs),
            priceMicros: values.price ? dollars(values.price, '--price') : undefined,
            byokPriceMicros: byok === undefined ? undefined : byok === 'none' ? null : dollars(byok, '--byok-price'),
            pricingRules: values['clear-rules'] ? [] : values.rule ? values.rule.map(parseRule) : undefined,
          });
          if (ok && values['platform-key'] !== undefined) await setPlatformKey(tx, id, sealKey(id, values['platform-key']));
          return ok;
        });
        if (!updated) throw new CliError(`API ${id} does not exist; use add`);
        return `updated ${JSON.stringify(describe((await getMeteredApi(sql, id))!))}${await announceChange(settings, id)}`;
      }
      case 'set-key': {
        const id = requireId();
        const key = values.clear ? null : (values.key ?? env.PLATFORM_KEY);
        if (key === undefined) throw new CliError('set-key needs --key KEY (or PLATFORM_KEY in the environment), or --clear');
        if (!(await setPlatformKey(sql, id, key === null ? null : sealKey(id, key)))) throw new CliError(`API ${id} does not exist`);
        const note = await announceChange(settings, id);
        return (key === null ? `cleared the platform key of ${id}` : `set the platform key of ${id}`) + note;
      }
      case 'show': {
        const id = requireId();
        const api = await getMeteredApi(sql, id);
        if (!api) throw new CliError(`API ${id} does not exist`);
        return JSON.stringify(describe(api), null, 2);
      }
      case 'remove': {
        const id = requireId();
        const outcome = await removeOperatorApi(sql, id);
        if (outcome === 'missing') throw new CliError(`API ${id} does not exist`);
        if (outcome === 'imported')
          throw new CliError(`API ${id} is imported from the catalog, not an operator API: the next import would bring it back`);
        return `removed ${id} (its connections and votes went with it; usage and ledger rows keep its id)${await announceChange(settings, id, { connections: true })}`;
      }
      case 'list':
        return (await listMeteredApis(sql, values.all ? {} : { source: 'operator' })).map((api) => JSON.stringify(describe(api))).join('\n');
      default:
        throw new CliError(`unknown command "${command}"\n\n${USAGE}`);
    }
  } catch (error) {
    if (error instanceof z.ZodError) throw new CliError(error.message);
    if (error instanceof PlatformError) throw new CliError(error.message);
    throw error;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

/** `npm run api -- oauth-app set|list|remove`: the operator's OAuth apps, one per provider. */
async function runOAuthAppCli(argv: string[], env: NodeJS.ProcessEnv, input: CliInput): Promise<string> {
  const [command, ...rest] = argv;
  const { values } = (() => {
    try {
      return parseArgs({
        args: rest,
        strict: true,
        options: {
          provider: { type: 'string' },
          'client-id': { type: 'string' },
          'client-secret-stdin': { type: 'boolean' },
          'client-secret-file': { type: 'string' },
          public: { type: 'boolean' },
          'authorization-url': { type: 'string' },
          'token-url': { type: 'string' },
          'revocation-url': { type: 'string' },
          issuer: { type: 'string' },
          scope: { type: 'string', multiple: true },
          param: { type: 'string', multiple: true },
          'token-auth': { type: 'string' },
        },
      });
    } catch (error) {
      throw new CliError((error as Error).message);
    }
  })();
  const settings = parseSettings(cliSettings, env);
  const sql = createSql(settings.DATABASE_URL, { max: 2, appName: 'api-cli' });
  const clients = new OAuthClients(settings);
  const operator = { accountId: null };
  try {
    switch (command) {
      case 'set': {
        if (!values.provider || !values['client-id']) throw new CliError('oauth-app set needs --provider and --client-id');
        const sources = [values['client-secret-stdin'], values['client-secret-file'] !== undefined, values.public].filter(Boolean).length;
        if (sources !== 1) throw new CliError('give exactly one of --client-secret-stdin, --client-secret-file PATH or --public');
        let clientSecret: string | null = null;
        if (values['client-secret-stdin']) {
          if (!input.readStdin) throw new CliError('--client-secret-stdin: no standard input to read');
          clientSecret = (await input.readStdin()).replace(/\r?\n$/, '');
        } else if (values['client-secret-file'] !== undefined) {
          const read = input.readFile ?? (async (path: string) => (await import('node:fs/promises')).readFile(path, 'utf8'));
          try {
            clientSecret = (await read(values['client-secret-file'])).replace(/\r?\n$/, '');
          } catch {
            throw new CliError(`--client-secret-file: cannot read ${values['client-secret-file']}`);
          }
        }
        if (clientSecret !== null && clientSecret.trim() === '') throw new CliError('the client secret is empty');
        const tokenAuth = values['token-auth'];
        if (tokenAuth !== undefined && tokenAuth !== 'basic' && tokenAuth !== 'post') throw new CliError('--token-auth must be basic or post');
        const app = await registerOAuthApp(sql, clients, settings.CONNECTIONS_MASTER_KEY, operator, {
          provider: values.provider,
          clientId: values['client-id'],
          clientSecret,
          authorizationUrl: values['authorization-url'],
          tokenUrl: values['token-url'],
          revocationUrl: values['revocation-url'] ?? null,
          issuer: values.issuer ?? null,
          defaultScopes: values.scope ?? [],
          authorizationParams: Object.fromEntries((values.param ?? []).map(parseParam)),
          ...(clientSecret === null
            ? { tokenAuthMethod: 'none' as const }
            : tokenAuth
              ? { tokenAuthMethod: tokenAuth === 'post' ? 'client_secret_post' : 'client_secret_basic' }
              : {}),
        });
        const redirect = `${settings.PUBLIC_URL.replace(/\/+$/, '')}/api/v1/oauth/callback`;
        return `set ${JSON.stringify(describeApp(app))}\nRegister this redirect URI with the provider: ${redirect}`;
      }
      case 'list':
        return (await listOAuthAppViews(sql, operator)).map((app) => JSON.stringify(describeApp(app))).join('\n');
      case 'remove': {
        if (!values.provider) throw new CliError('oauth-app remove needs --provider');
        const removed = await removeOAuthApp(sql, operator, values.provider);
        if (!removed) throw new CliError(`no operator OAuth app for ${values.provider}`);
        return `removed the OAuth app for ${removed.provider}`;
      }
      default:
        throw new CliError(`unknown oauth-app command "${command ?? ''}"\n\n${USAGE}`);
    }
  } catch (error) {
    if (error instanceof PlatformError) throw new CliError(error.hint ? `${error.message}. ${error.hint}` : error.message);
    if (error instanceof z.ZodError) throw new CliError(error.message);
    throw error;
  } finally {
    await clients.close();
    await sql.end({ timeout: 5 });
  }
}
