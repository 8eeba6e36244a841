import { parseArgs } from 'node:util';
import { z } from 'zod';
import {
  getMeteredApi,
  insertOperatorApi,
  listMeteredApis,
  publishApiChange,
  setPlatformKey,
  updateApi,
  type AuthScheme,
  type MeteredApi,
  type PricingRule,
} from '#db/metered-apis';
import { formatDollars, parseDollars } from '#contracts/money';
import { masterKeySetting, platformKeyContext, sealSecret } from '#core/platform';
import { parseSettings, sharedSettings } from '#core/platform';
import { createRedis } from '#core/platform';
import { createSql } from '#db/sql';
import { API_ID_PATTERN as API_ID } from '#contracts/directory';

export const USAGE = `Operator tool for the directory's metered APIs.

  npm run api -- add --id ID --name NAME --base-url URL --price DOLLARS [--auth SCHEME]
                     [--platform-key KEY] [--byok-price DOLLARS] [--rule "METHOD PATH=DOLLARS"]...
                     [--provider NAME] [--category NAME]... [--description TEXT]
  npm run api -- update --id ID [--name ...] [--base-url ...] [--price ...] [--auth ...]
                     [--byok-price DOLLARS|none] [--rule ...]... [--clear-rules]
  npm run api -- set-key --id ID --key KEY        (or --clear; the key can also come from PLATFORM_KEY)
  npm run api -- list [--all]                     (operator APIs; --all includes the imported catalog)
  npm run api -- show --id ID

SCHEME is none | bearer | basic | oauth2 | header:NAME | query:NAME (default none).
A rule prices one method and path: "POST /messages*=0.005" (a trailing * matches any remainder;
METHOD may be *). Prices are dollars with up to six decimals. Keys are stored AES-256-GCM under
CONNECTIONS_MASTER_KEY and never printed.`;

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

function describe(api: MeteredApi) {
  return {
    id: api.id,
    name: api.name,
    baseUrl: api.baseUrl,
    auth: api.authScheme,
    price: formatDollars(api.priceMicros),
    byokPrice: api.byokPriceMicros === null ? null : formatDollars(api.byokPriceMicros),
    rules: api.pricingRules.map((r) => `${r.method ?? '*'} ${r.path}=${formatDollars(r.priceMicros)}`),
    platformKey: api.platformKeyEncrypted ? 'set' : 'none',
    source: api.source,
  };
}

const cliSettings = sharedSettings
  .pick({ DATABASE_URL: true, REDIS_URL: true, REDIS_PREFIX: true })
  .extend({ CONNECTIONS_MASTER_KEY: masterKeySetting });

/**
 * Tells the edges to drop their cached copy of a changed API row (see packages/core/directory/api-cache.ts).
 * Returns a note for the output when Redis could not be told: the edges then see it when their copy expires.
 */
async function announceChange(settings: { REDIS_URL: string; REDIS_PREFIX: string }, id: string): Promise<string> {
  const redis = createRedis(settings.REDIS_URL, 'request-path', {
    lazyConnect: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  try {
    await redis.connect();
    await publishApiChange(redis, settings.REDIS_PREFIX, id);
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
export async function runApiCli(argv: string[], env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const [command, ...rest] = argv;
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
          category: { type: 'string', multiple: true },
          description: { type: 'string' },
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
  try {
    switch (command) {
      case 'add': {
        const id = requireId();
        if (!values.name || !values['base-url'] || !values.price) throw new CliError('add needs --id, --name, --base-url and --price');
        const created = await sql.begin(async (tx) => {
          const inserted = await insertOperatorApi(tx, {
            id,
            name: values.name!,
            provider: values.provider,
            baseUrl: baseUrl(values['base-url']!),
            authScheme: parseAuth(values.auth ?? 'none'),
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
        const updated = await sql.begin(async (tx) => {
          const ok = await updateApi(tx, id, {
            name: values.name,
            baseUrl: values['base-url'] ? baseUrl(values['base-url']) : undefined,
            authScheme: values.auth ? parseAuth(values.auth) : undefined,
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
      case 'list':
        return (await listMeteredApis(sql, values.all ? {} : { source: 'operator' })).map((api) => JSON.stringify(describe(api))).join('\n');
      default:
        throw new CliError(`unknown command "${command}"\n\n${USAGE}`);
    }
  } catch (error) {
    if (error instanceof z.ZodError) throw new CliError(error.message);
    throw error;
  } finally {
    await sql.end({ timeout: 5 });
  }
}
