// `npm run demo`: an agent's walk through the whole platform, against the stack `npm run up` runs.
//
// It starts a small example upstream on 127.0.0.1 (a weather forecast and an SMS sender), registers
// it as two APIs with the operator CLI (`npm run api -- add`), then, as an agent: registers, starts
// a webhook receiver on 127.0.0.1 and registers it for the account's events (it verifies every
// delivery's Standard Webhooks signature), discovers an API, reads its instructions, sets a
// low-balance alert that its next call crosses, calls the API through the metered proxy (and sees
// the balance.low webhook arrive), runs the weather-alert-sms cookbook session (following its
// server-sent events), sees the human step announced by e-mail (read from the development mail
// catcher) and by webhook, lets a person complete it through the dashboard's login, reads usage and
// balance, does a little of the same through the MCP endpoint with the official MCP client, and
// finally asks a person for an OAuth connection: the operator registers a real OAuth provider
// (`oidc-provider` on 127.0.0.1, packages/fixtures/oidc-provider.ts) and an API its resource server
// serves; the agent sees it needs OAuth, gets 409 connection_required, and requests a connection
// with a purpose; the person sees the request in the inbox, consents at the provider (its login and
// consent forms, submitted over HTTP) and comes back through the platform's callback; the agent's
// long poll answers `connected` and its call goes through carrying the token. Every step prints what it did and the key fields of the answer; no full key, webhook
// secret, password or session cookie is ever printed. Any failed step stops the demo with exit
// code 1 and says what went wrong.
//
// Settings (environment or .env): DEMO_BASE_URL (default PUBLIC_URL, else http://127.0.0.1:$PORT,
// else :3000); DATABASE_URL for the operator CLI (scripts/run.sh derives it from PGDATABASE);
// SMTP_URL, MAIL_CATCHER_SMTP_PORT and MAIL_CATCHER_HTTP_PORT as `npm run up` reads them (when
// SMTP_URL points elsewhere than the mail catcher, or none runs, the e-mail check is skipped).
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { Client as McpClient, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { Webhook } from 'standardwebhooks';
import { createPlatformClient, type PlatformClient } from '#client';
import { startTestOAuthProvider, type TestOAuthProvider } from '#fixtures/oidc-provider';

const run = promisify(execFile);
const BASE = (process.env.DEMO_BASE_URL ?? process.env.PUBLIC_URL ?? `http://127.0.0.1:${process.env.PORT ?? 3000}`).replace(/\/+$/, '');
const API = `${BASE}/api/v1`;
const WEATHER_API = 'demo-weather';
const SMS_API = 'demo-sms';
const OAUTH_API = 'demo-oauth';
const OAUTH_PRICE = '0.004';
const COOKBOOK = 'weather-alert-sms';
const WEATHER_PRICE = '0.002';
const SMS_PRICE = '0.003';
const MAIL_CATCHER_SMTP_PORT = Number(process.env.MAIL_CATCHER_SMTP_PORT ?? 1025);
const MAIL_CATCHER = `http://127.0.0.1:${process.env.MAIL_CATCHER_HTTP_PORT ?? 1080}`;
const tty = process.stdout.isTTY;
const bold = (text: string) => (tty ? `\x1b[1m${text}\x1b[0m` : text);
const dim = (text: string) => (tty ? `\x1b[2m${text}\x1b[0m` : text);

class DemoError extends Error {}

let stepNo = 0;
function step(title: string) {
  stepNo += 1;
  console.log(`\n${bold(`${String(stepNo).padStart(2)}. ${title}`)}`);
}
const show = (label: string, value: unknown) => console.log(`    ${label.padEnd(18)} ${typeof value === 'string' ? value : JSON.stringify(value)}`);
const note = (text: string) => console.log(`    ${dim(text)}`);

// ---------------------------------------------------------------------------------------------
// HTTP helpers. Every REST call goes through the typed client (packages/client, generated from the
// OpenAPI document): `expectStatus` checks its status and fails the demo with the answer it got.
// The proxied calls use plain fetch (`call`): their answers are the upstream's, which the platform's
// OpenAPI document cannot describe; the event stream is read with fetch too.

interface Answer<T> {
  status: number;
  headers: Headers;
  body: T;
}

const notRunning = (what: string, error: unknown) =>
  new DemoError(
    `${what} could not connect (${(error as Error).cause ?? (error as Error).message}). Is the stack running? Start it with \`npm run up\` in another terminal.`,
  );

/** A typed client call that must answer `expected`: its data (or, for an expected error status, its error body) and headers. */
async function expectStatus<D, E>(
  what: string,
  request: Promise<{ data?: D; error?: E; response: Response }>,
  expected = 200,
): Promise<Answer<NonNullable<D>> & { error: E }> {
  let answer: { data?: D; error?: E; response: Response };
  try {
    answer = await request;
  } catch (error) {
    throw notRunning(what, error);
  }
  if (answer.response.status !== expected) {
    throw new DemoError(
      `${what} answered ${answer.response.status}, expected ${expected}: ${JSON.stringify(answer.error ?? answer.data).slice(0, 600)}`,
    );
  }
  return { status: answer.response.status, headers: answer.response.headers, body: answer.data as NonNullable<D>, error: answer.error as E };
}

/** A proxied call: the upstream's answer, as it came. */
async function call<T = Record<string, unknown>>(
  method: string,
  path: string,
  options: { headers?: Record<string, string>; body?: unknown; expect?: number } = {},
): Promise<Answer<T>> {
  const url = `${API}${path}`;
  const headers: Record<string, string> = { ...options.headers };
  if (options.body !== undefined) headers['content-type'] = 'application/json';
  let response: Response;
  try {
    response = await fetch(url, { method, headers, body: options.body === undefined ? undefined : JSON.stringify(options.body) });
  } catch (error) {
    throw notRunning(`${method} ${url}`, error);
  }
  const text = await response.text();
  let body: unknown = text;
  if ((response.headers.get('content-type') ?? '').includes('json')) body = JSON.parse(text);
  const expected = options.expect ?? 200;
  if (response.status !== expected) {
    throw new DemoError(`${method} ${path} answered ${response.status}, expected ${expected}: ${text.slice(0, 600)}`);
  }
  return { status: response.status, headers: response.headers, body: body as T };
}

const costHeaders = (headers: Headers) => `cost $${headers.get('x-service-cost') ?? '?'}, balance after $${headers.get('x-service-balance') ?? '?'}`;

// ---------------------------------------------------------------------------------------------
// The example upstream: what a third-party weather and SMS provider would answer.

interface ExampleUpstream {
  server: Server;
  port: number;
  sent: { to: string; text: string }[];
  requests: number;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

async function startExampleUpstream(): Promise<ExampleUpstream> {
  const upstream: ExampleUpstream = { server: createServer(), port: 0, sent: [], requests: 0 };
  upstream.server.on('request', (request, response) => {
    upstream.requests += 1;
    const url = new URL(request.url ?? '/', 'http://upstream');
    const reply = (status: number, body: unknown) => {
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(JSON.stringify(body));
    };
    void (async () => {
      if (request.method === 'GET' && url.pathname === '/weather/forecast') {
        const city = url.searchParams.get('city') ?? 'Oslo';
        return reply(200, {
          location: { name: city, lat: 59.91, lon: 10.75 },
          hours: [
            { at: '2026-11-22T18:00:00Z', windMs: 24, rainMm: 12 },
            { at: '2026-11-22T21:00:00Z', windMs: 31, rainMm: 18 },
          ],
          alerts: [{ title: 'Storm warning: gusts up to 31 m/s', severity: 'severe', expires: '2026-11-23T06:00:00Z' }],
        });
      }
      if (request.method === 'POST' && url.pathname === '/sms/messages') {
        const body = JSON.parse((await readBody(request)) || '{}') as { to?: string[]; text?: string };
        const ids = (body.to ?? []).map((to) => {
          upstream.sent.push({ to, text: body.text ?? '' });
          return `msg_${randomBytes(6).toString('hex')}`;
        });
        return reply(201, { messageIds: ids });
      }
      return reply(404, { error: `no route ${request.method} ${url.pathname}` });
    })().catch((error: unknown) => reply(500, { error: String(error) }));
  });
  await new Promise<void>((resolve) => upstream.server.listen(0, '127.0.0.1', resolve));
  upstream.port = (upstream.server.address() as AddressInfo).port;
  return upstream;
}

// ---------------------------------------------------------------------------------------------
// The operator CLI: the supported way to add an API (it writes DATABASE_URL, the stack's database).

/** Runs `npm run api -- ARGS` (apps/cli/api.ts); `stdin` is written to its standard input (a secret, never an argument). */
async function operatorCli(args: string[], stdin?: string): Promise<{ ok: boolean; out: string }> {
  try {
    const running = run('npx', ['tsx', 'apps/cli/api.ts', ...args], { cwd: process.cwd(), env: process.env });
    if (stdin !== undefined) running.child.stdin?.end(stdin);
    const { stdout, stderr } = await running;
    return { ok: true, out: `${stdout}${stderr}` };
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; message: string };
    return { ok: false, out: `${failed.stdout ?? ''}${failed.stderr ?? ''}` || failed.message };
  }
}

async function registerUpstreamApi(
  id: string,
  name: string,
  baseUrl: string,
  price: string,
  category: string,
  description: string,
  /** More options for add and update alike (an OAuth API's --oauth-* options). */
  extra: string[] = [],
) {
  const shown = await operatorCli(['show', '--id', id]);
  const args = shown.ok
    ? ['update', '--id', id, '--base-url', baseUrl, '--price', price, ...extra]
    : [
        'add',
        '--id',
        id,
        '--name',
        name,
        '--base-url',
        baseUrl,
        '--price',
        price,
        '--auth',
        extra.some((arg) => arg.startsWith('--oauth-')) ? 'oauth2' : 'none',
        '--category',
        category,
        '--description',
        description,
        ...extra,
      ];
  const result = await operatorCli(args);
  if (!result.ok) throw new DemoError(`npm run api -- ${args.slice(0, 3).join(' ')} failed:\n${result.out.trim()}`);
  show(`npm run api -- ${args[0]}`, `${id} -> ${baseUrl} at $${price} a call`);
}

// ---------------------------------------------------------------------------------------------
// Server-sent events: a reader in the background that prints each event as it arrives.

interface SseEvent {
  id: string;
  event: string;
  data: Record<string, unknown>;
}

function followEvents(path: string, headers: Record<string, string>) {
  const events: SseEvent[] = [];
  const waiters: { name: string; resolve: (event: SseEvent) => void }[] = [];
  const controller = new AbortController();
  const done = (async () => {
    const response = await fetch(`${API}${path}`, { headers: { ...headers, accept: 'text/event-stream' }, signal: controller.signal });
    if (response.status !== 200 || !response.body) throw new DemoError(`GET ${path} answered ${response.status}: ${await response.text()}`);
    show('stream open', `${response.headers.get('content-type')}`);
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of response.body) {
      buffer += decoder.decode(chunk as Uint8Array, { stream: true });
      let end: number;
      while ((end = buffer.indexOf('\n\n')) !== -1) {
        const frame = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const fields = new Map<string, string>();
        for (const line of frame.split('\n')) {
          if (line.startsWith(':') || !line.includes(':')) continue;
          const colon = line.indexOf(':');
          fields.set(line.slice(0, colon), line.slice(colon + 1).trimStart());
        }
        if (!fields.has('event')) continue;
        const event = {
          id: fields.get('id') ?? '',
          event: fields.get('event')!,
          data: JSON.parse(fields.get('data') ?? '{}') as Record<string, unknown>,
        };
        events.push(event);
        const detail = [event.data.stepId, event.data.kind, event.data.progress ? JSON.stringify(event.data.progress) : undefined]
          .filter(Boolean)
          .join(' ');
        console.log(`    ${dim('event')} id=${event.id.padEnd(5)} ${event.event.padEnd(21)} ${detail}`);
        for (const waiter of waiters.filter((w) => w.name === event.event)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve(event);
        }
      }
    }
    return events;
  })();
  done.catch(() => undefined);
  return {
    events,
    done,
    close: () => controller.abort(),
    /** Resolves with the first event of that name (already seen or still to come). */
    waitFor(name: string, timeoutMs = 15000): Promise<SseEvent> {
      const seen = events.find((event) => event.event === name);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new DemoError(`no "${name}" event on the session's stream within ${timeoutMs / 1000}s (is the Temporal worker running?)`)),
          timeoutMs,
        );
        waiters.push({ name, resolve: (event) => (clearTimeout(timer), resolve(event)) });
      });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// A webhook receiver: what the agent's own service would run to hear about its account. It checks
// each delivery's Standard Webhooks signature with the secret the registration answered, and prints
// one line per verified event (a retry of one already seen, same webhook-id, is acknowledged only).

interface WebhookEvent {
  webhookId: string;
  type: string;
  data: Record<string, unknown>;
  receivedAt: number;
}

const money = (value: unknown) => (typeof value === 'number' ? `$${value}` : String(value));

function summarize(type: string, data: Record<string, unknown>): string {
  if (type === 'balance.low') return `balance ${money(data.balance)}, threshold ${money(data.threshold)}`;
  if (type === 'balance.depleted') return `balance ${money(data.balance)}`;
  if (type.startsWith('human_step.')) return `session ${String(data.sessionId)} step ${String(data.stepId)} "${String(data.title)}"`;
  return JSON.stringify(data).slice(0, 100);
}

async function startWebhookReceiver() {
  const server = createServer();
  const events: WebhookEvent[] = [];
  const rejected: string[] = [];
  const waiters: { type: string; resolve: (event: WebhookEvent) => void }[] = [];
  let verifier: Webhook | null = null;
  server.on('request', (request, response) => {
    const answer = (status: number) => {
      response.writeHead(status);
      response.end();
    };
    void (async () => {
      const raw = await readBody(request);
      if (request.method !== 'POST') return answer(405);
      // Nothing is registered yet: ask for a retry rather than accept what cannot be checked.
      if (!verifier) return answer(503);
      const header = (name: string) => String(request.headers[name] ?? '');
      const webhookId = header('webhook-id');
      let payload: { type: string; data?: Record<string, unknown> };
      try {
        payload = verifier.verify(raw, {
          'webhook-id': webhookId,
          'webhook-timestamp': header('webhook-timestamp'),
          'webhook-signature': header('webhook-signature'),
        }) as typeof payload;
      } catch (error) {
        rejected.push(`${webhookId || '(no webhook-id)'}: ${(error as Error).message}`);
        console.log(`    ${dim('webhook')} REJECTED ${webhookId || '(no webhook-id)'}: ${(error as Error).message}`);
        return answer(400);
      }
      answer(204);
      if (events.some((event) => event.webhookId === webhookId)) return;
      const event = { webhookId, type: payload.type, data: payload.data ?? {}, receivedAt: Date.now() };
      events.push(event);
      console.log(
        `    ${dim('webhook')} ${event.type.padEnd(21)} webhook-id=${webhookId} ${summarize(event.type, event.data)} ${dim('(signature verified)')}`,
      );
      for (const waiter of waiters.filter((w) => w.type === event.type)) {
        waiters.splice(waiters.indexOf(waiter), 1);
        waiter.resolve(event);
      }
    })().catch(() => {
      if (!response.headersSent) answer(500);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    /** The signing secret from POST /webhooks: deliveries are verified with it from now on. */
    useSecret(secret: string) {
      verifier = new Webhook(secret);
    },
    close() {
      server.closeAllConnections();
      server.close();
    },
    /** Resolves with the first verified event of that type (already received or still to come). */
    waitFor(type: string, timeoutMs: number, why: () => Promise<string>): Promise<WebhookEvent> {
      const seen = events.find((event) => event.type === type);
      if (seen) return Promise.resolve(seen);
      return new Promise((resolve, reject) => {
        const waiter = { type, resolve: (event: WebhookEvent) => (clearTimeout(timer), resolve(event)) };
        const timer = setTimeout(() => {
          waiters.splice(waiters.indexOf(waiter), 1);
          const refused = rejected.length > 0 ? ` The receiver refused ${rejected.length} delivery(ies): ${rejected.join('; ')}.` : '';
          void why().then((reason) =>
            reject(new DemoError(`no verified "${type}" webhook reached the receiver within ${timeoutMs / 1000}s.${refused} ${reason}`)),
          );
        }, timeoutMs);
        waiters.push(waiter);
      });
    },
  };
}

type WebhookReceiver = Awaited<ReturnType<typeof startWebhookReceiver>>;

// ---------------------------------------------------------------------------------------------
// The development mail catcher `npm run up` starts when SMTP_URL is not set (scripts/mail-catcher.ts):
// the messages it caught, as JSON.

interface CaughtMail {
  id: number;
  receivedAt: string;
  subject?: string;
  to?: { value: { address?: string }[] } | { value: { address?: string }[] }[];
  text?: string;
}

const recipients = (mail: CaughtMail) => [mail.to ?? []].flat().flatMap((to) => to.value.map((address) => address.address ?? ''));

/** Why the demo cannot read the stack's mail (SMTP_URL goes elsewhere), or null when it goes to the mail catcher. */
function mailElsewhere(): string | null {
  const configured = process.env.SMTP_URL;
  if (!configured) return null;
  try {
    const url = new URL(configured);
    if (['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname) && Number(url.port || 25) === MAIL_CATCHER_SMTP_PORT) return null;
    return `SMTP_URL sends mail to ${url.hostname}:${url.port || 25}, not to the development mail catcher`;
  } catch {
    return 'SMTP_URL is not a URL the demo can read';
  }
}

/**
 * Polls the mail catcher for the first message that `match` accepts: the message, or a string
 * saying why there is none to read (no catcher listening); a catcher that never gets it fails.
 */
async function waitForMail(match: (mail: CaughtMail) => boolean, timeoutMs: number, what: string): Promise<CaughtMail | string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let messages: CaughtMail[];
    try {
      const response = await fetch(`${MAIL_CATCHER}/messages.json`);
      if (response.status !== 200 || !(response.headers.get('content-type') ?? '').includes('json')) {
        return `${MAIL_CATCHER}/messages.json answered ${response.status} ${response.headers.get('content-type') ?? ''}: not the development mail catcher`;
      }
      messages = (await response.json()) as CaughtMail[];
    } catch (error) {
      return `no mail catcher answers at ${MAIL_CATCHER} (${String((error as Error).cause ?? (error as Error).message)}); \`npm run up\` starts one only when SMTP_URL is not set`;
    }
    const found = messages.find(match);
    if (found) return found;
    if (Date.now() > deadline) {
      throw new DemoError(
        `the mail catcher at ${MAIL_CATCHER}/ caught no ${what} within ${timeoutMs / 1000}s (${messages.length} other message(s)): is the queue worker (the e-mail queue) running? Its [queue-workers] lines in \`npm run up\` say why a message failed.`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

// ---------------------------------------------------------------------------------------------

async function main() {
  console.log(bold(`Agent API platform demo against ${BASE}`));
  const health = await expectStatus('GET /health', createPlatformClient({ baseUrl: BASE }).GET('/api/v1/health'));
  if (health.body.status !== 'healthy') throw new DemoError(`the stack is not healthy: ${JSON.stringify(health.body)}`);
  note(`health: ${health.body.status} ${JSON.stringify(health.body.checks)}`);

  // -- operator preparation ------------------------------------------------------------------
  step('Operator: start a local example upstream and register it with the operator CLI');
  const upstream = await startExampleUpstream();
  const upstreamUrl = `http://127.0.0.1:${upstream.port}`;
  show('example upstream', `${upstreamUrl} (GET /weather/forecast, POST /sms/messages)`);
  const receiver = await startWebhookReceiver();
  let provider: TestOAuthProvider | undefined;
  try {
    await registerUpstreamApi(
      WEATHER_API,
      'Demo Weather',
      `${upstreamUrl}/weather`,
      WEATHER_PRICE,
      'weather',
      'Example forecast and severe-weather alerts for a city (the demo upstream).',
    );
    await registerUpstreamApi(
      SMS_API,
      'Demo SMS',
      `${upstreamUrl}/sms`,
      SMS_PRICE,
      'messaging',
      'Example SMS sender: send text messages to phone numbers (the demo upstream).',
    );
    // The OAuth provider of the last part: the platform's callback on this edge is its client's one redirect URI.
    provider = await startTestOAuthProvider({ redirectUris: [`${API}/oauth/callback`], accessTokenTtl: 300 });
    await walk(upstream, receiver, provider);
  } finally {
    upstream.server.closeAllConnections();
    upstream.server.close();
    receiver.close();
    if (provider) {
      await provider.close();
      // The provider lived for this run only: its app goes with it (a later run registers a new one).
      await operatorCli(['oauth-app', 'remove', '--provider', provider.host]);
    }
  }
}

async function walk(upstream: ExampleUpstream, receiver: WebhookReceiver, provider: TestOAuthProvider) {
  // -- 1. register -----------------------------------------------------------------------------
  step('Register an account (POST /register)');
  const email = `demo-${Date.now().toString(36)}-${randomBytes(3).toString('hex')}@example.com`;
  const password = `demo ${randomBytes(12).toString('base64url')}`;
  const anonymous = createPlatformClient({ baseUrl: BASE });
  const registered = await expectStatus('POST /register', anonymous.POST('/api/v1/register', { body: { email, password } }), 201).catch(
    (error: unknown) => {
      if (error instanceof DemoError && / 429,/.test(error.message)) {
        throw new DemoError(
          `${error.message}\nRegistration is rate limited per address (RATE_LIMIT_REGISTER_MAX a window); wait, or start the stack with a higher RATE_LIMIT_REGISTER_MAX.`,
        );
      }
      throw error;
    },
  );
  const key = registered.body.fullKey;
  const auth = { authorization: `Bearer ${key}` };
  const api: PlatformClient = createPlatformClient({ baseUrl: BASE, apiKey: key });
  show('account', `${registered.body.account.id} (${registered.body.account.email})`);
  show('API key', `${registered.body.key.prefix}... (id ${registered.body.key.id}; the full key is shown once and kept by the agent)`);
  show('sign-up credit', `$${registered.body.balance}`);

  // -- webhooks --------------------------------------------------------------------------------
  step('Listen for account events: a local webhook receiver, registered with POST /webhooks');
  const hook = await expectStatus(
    'POST /webhooks',
    api.POST('/api/v1/webhooks', {
      body: { url: receiver.url, eventTypes: ['balance.low', 'human_step.pending'], description: 'npm run demo receiver' },
    }),
    201,
  ).catch((error: unknown) => {
    if (error instanceof DemoError && /url must be https|resolves to a private/.test(error.message)) {
      throw new DemoError(
        `${error.message}\nThe running edge accepts an http://127.0.0.1 endpoint only with ALLOW_PRIVATE_UPSTREAMS=true, which \`npm run up\` sets outside production (development only, never in production).`,
      );
    }
    throw error;
  });
  receiver.useSecret(hook.body.secret);
  show('receiver', `${receiver.url} (node:http; checks each delivery with the standardwebhooks package)`);
  show('webhook', `${hook.body.webhook.id} ${hook.body.webhook.status} for ${hook.body.webhook.eventTypes.join(', ')}`);
  show('signing secret', `${hook.body.secret.slice(0, 6)}... (in this answer only; the receiver keeps it, it is not printed)`);
  /** What the delivery log says, for a webhook that does not come. */
  const deliveryLog = async () => {
    const log = await api.GET('/api/v1/webhooks/{id}/deliveries', { params: { path: { id: hook.body.webhook.id } } }).catch(() => undefined);
    const rows = log?.data?.deliveries ?? [];
    if (rows.length === 0)
      return 'Its delivery log (GET /webhooks/{id}/deliveries) is empty: the event was not recorded (see the [edge] and [temporal-worker] lines of `npm run up`).';
    const described = rows.map(
      (row) => `${row.eventType} ${row.status} after ${row.attempts} attempt(s)${row.lastError ? ` (${row.lastError})` : ''}`,
    );
    return `Its delivery log: ${described.join('; ')}. Is the queue worker running (the [queue-workers] lines of \`npm run up\`)?`;
  };

  // -- 2. discover -----------------------------------------------------------------------------
  step('Discover an API for the job (GET /discover?q=...)');
  const query = 'weather forecast with severe weather alerts';
  const discovered = await expectStatus('GET /discover', api.GET('/api/v1/discover', { params: { query: { q: query } } }));
  show('query', query);
  for (const result of discovered.body.results.slice(0, 5)) {
    note(`${result.score.toFixed(3).padStart(6)}  ${result.api.id.padEnd(36)} $${result.api.pricePerCall}/call  ${result.api.name}`);
  }
  const rank = discovered.body.results.findIndex((result) => result.api.id === WEATHER_API);
  show('chosen', `${WEATHER_API} (${rank >= 0 ? `result #${rank + 1}` : "the operator's local example; the catalog APIs need the internet"})`);

  // -- 3. instructions -------------------------------------------------------------------------
  step(`Read its instructions (GET /apis/${WEATHER_API}/instructions, paid)`);
  const instructions = await expectStatus(
    'GET /apis/{id}/instructions',
    api.GET('/api/v1/apis/{id}/instructions', { params: { path: { id: WEATHER_API } } }),
  );
  show('charged', costHeaders(instructions.headers));
  const lines = instructions.body.instructions.split('\n').filter((line) => line.trim() !== '');
  show('instructions', `${instructions.body.instructions.length} characters of markdown, starting:`);
  for (const line of lines.slice(0, 3)) note(line.slice(0, 110));

  // -- low-balance alert -----------------------------------------------------------------------
  step('Set a low-balance alert just under the balance (GET /balance, PUT /balance/alerts)');
  const current = await expectStatus('GET /balance', api.GET('/api/v1/balance'));
  const priceMicros = Math.round(Number(WEATHER_PRICE) * 1e6);
  const thresholdMicros = Math.round(current.body.balance * 1e6) - Math.floor(priceMicros / 2);
  if (thresholdMicros <= 0) throw new DemoError(`the balance ($${current.body.balance}) is too low to set a threshold under it`);
  const alerts = await expectStatus(
    'PUT /balance/alerts',
    api.PUT('/api/v1/balance/alerts', { body: { lowBalanceThreshold: (thresholdMicros / 1e6).toFixed(6) } }),
  );
  show('balance', `$${current.body.balance}`);
  show('threshold', `$${alerts.body.lowBalanceThreshold} (the next call, $${WEATHER_PRICE}, takes the balance below it)`);

  // -- 4. proxied call -------------------------------------------------------------------------
  step(`Call it through the metered proxy (GET /proxy/${WEATHER_API}/forecast?city=Oslo)`);
  const before = upstream.requests;
  const calledAt = Date.now();
  const proxied = await call<{
    location: { name: string; lat: number; lon: number };
    alerts: { title: string; severity: string; expires: string }[];
  }>('GET', `/proxy/${WEATHER_API}/forecast?city=Oslo`, { headers: { ...auth, 'x-max-cost': '0.01' } }).catch((error: unknown) => {
    if (error instanceof DemoError && /private_upstream/.test(error.message)) {
      throw new DemoError(
        `${error.message}\nThe running edge refuses loopback upstreams. \`npm run up\` allows them outside production unless ALLOW_PRIVATE_UPSTREAMS=false is set (environment or .env); restart the edge with ALLOW_PRIVATE_UPSTREAMS=true (development only, never in production).`,
      );
    }
    throw error;
  });
  if (upstream.requests !== before + 1) throw new DemoError('the proxied call did not reach the example upstream');
  show('status', `${proxied.status}, X-Service-Api: ${proxied.headers.get('x-service-api')}`);
  show('charged', costHeaders(proxied.headers));
  show('forecast', `${proxied.body.location.name}: ${proxied.body.alerts.map((alert) => `${alert.title} (${alert.severity})`).join('; ')}`);
  const low = await receiver.waitFor('balance.low', 30000, deliveryLog);
  show(
    'balance.low',
    `the call took the balance from $${current.body.balance} to ${money(low.data.balance)}, under the ${money(low.data.threshold)} threshold: the edge saw the crossing after the charge and the signed event reached the receiver ${low.receivedAt - calledAt} ms after the call`,
  );

  // -- 5. cookbook session ---------------------------------------------------------------------
  step(`Find a cookbook and start a session (GET /cookbooks?q=sms, GET /cookbooks/${COOKBOOK}, POST .../start)`);
  const found = await expectStatus('GET /cookbooks', api.GET('/api/v1/cookbooks', { params: { query: { q: 'sms' } } }));
  for (const cookbook of found.body.cookbooks)
    note(`${cookbook.id.padEnd(28)} ${cookbook.stepCount} steps (${cookbook.humanSteps} human)  ${cookbook.title}`);
  const details = await expectStatus('GET /cookbooks/{id}', api.GET('/api/v1/cookbooks/{id}', { params: { path: { id: COOKBOOK } } }));
  show('details charged', costHeaders(details.headers));
  show('slots', details.body.cookbook.slots.map((slot) => `${slot.name}${slot.required ? '*' : ''} (${slot.category})`).join(', '));
  show('steps', details.body.cookbook.steps.map((s) => `${s.stepId} [${s.kind}]`).join(' -> '));
  const selectedApis = { weather: WEATHER_API, sms: SMS_API };
  const idempotencyKey = `demo-${randomBytes(8).toString('hex')}`;
  const start = () =>
    api.POST('/api/v1/cookbooks/{id}/start', {
      params: { path: { id: COOKBOOK }, header: { 'idempotency-key': idempotencyKey } },
      body: { selectedApis },
    });
  const started = await expectStatus('POST /cookbooks/{id}/start', start(), 201);
  const session = started.body.session;
  const sessionPath = `/cookbooks/sessions/${session.sessionId}`;
  const inSession = { params: { path: { sessionId: session.sessionId } } };
  show(
    'session',
    `${session.sessionId} status=${session.status} currentStep=${session.currentStep} progress=${session.progress.completed}/${session.progress.total}`,
  );
  show('selectedApis', selectedApis);
  const replay = await expectStatus('POST /cookbooks/{id}/start (retry)', start(), 201);
  if (replay.body.session.sessionId !== session.sessionId) throw new DemoError('a replayed Idempotency-Key started another session');
  show('retry, same key', `same session, Idempotent-Replayed: ${replay.headers.get('idempotent-replayed')}`);
  note(`operators: ${process.env.TEMPORAL_UI_URL ?? 'http://127.0.0.1:8233'}/namespaces/default/workflows/cookbook-session-${session.sessionId}`);

  // -- 6. events -------------------------------------------------------------------------------
  step(`Follow the session's events (GET ${sessionPath}/events, server-sent events)`);
  const stream = followEvents(`${sessionPath}/events`, auth);
  await stream.waitFor('step.started');

  // -- 7. agent steps --------------------------------------------------------------------------
  step('Complete the agent steps (GET .../step, POST .../complete-step)');
  const first = await expectStatus('GET .../step', api.GET('/api/v1/cookbooks/sessions/{sessionId}/step', inSession));
  show('current step', `${first.body.step.stepId} [${first.body.step.kind}] ${first.body.step.title}`);
  // The current step always carries its instructions (only steps not reached yet show none).
  note((first.body.step.instructions ?? '').slice(0, 160) + '...');
  const forecastResult = {
    location: proxied.body.location,
    severe: proxied.body.alerts.some((alert) => alert.severity === 'severe'),
    alerts: proxied.body.alerts,
  };
  const completeStep = (stepId: string, resultData: Record<string, unknown>, expected = 200) =>
    expectStatus(
      `POST .../complete-step (${stepId})`,
      api.POST('/api/v1/cookbooks/sessions/{sessionId}/complete-step', { ...inSession, body: { stepId, resultData } }),
      expected,
    );
  let completed = await completeStep(first.body.step.stepId, forecastResult);
  show(
    'completed',
    `${first.body.step.stepId} -> next ${completed.body.nextStep?.stepId} (progress ${completed.body.session.progress.completed}/${completed.body.session.progress.total})`,
  );
  const draft = {
    message: 'Storm warning for Oslo tonight from 18:00, gusts to 31 m/s. Stay indoors, secure loose objects.',
    recipients: ['+4712345678', '+4798765432'],
  };
  const invalid = await completeStep('draft-message', { message: draft.message, recipients: ['12345'] }, 400);
  show('bad resultData', `400 ${invalid.error.code}: ${invalid.error.error}`);
  completed = await completeStep('draft-message', draft);
  show(
    'completed',
    `draft-message -> next ${completed.body.nextStep?.stepId} [${completed.body.nextStep?.kind}], status ${completed.body.session.status}`,
  );

  // -- 8. the pending human step ---------------------------------------------------------------
  step('The human step waits for a person, announced by e-mail and webhook (GET /me/human-steps; an API key gets 403)');
  await stream.waitFor('human_step.pending');
  const inbox = await expectStatus('GET /me/human-steps', api.GET('/api/v1/me/human-steps'));
  const pending = inbox.body.humanSteps.find((h) => h.sessionId === session.sessionId);
  if (!pending) throw new DemoError(`GET /me/human-steps does not list the session's human step: ${JSON.stringify(inbox.body)}`);
  show('pending', `${pending.stepId}: ${pending.title} (${pending.cookbookTitle})`);
  show('reminder / expiry', `${pending.remindAt} / ${pending.expiresAt}`);
  const refused = await completeStep(pending.stepId, { approved: true }, 403);
  show('with the API key', `403 ${refused.error.code} (a person completes human steps)`);
  const mail =
    mailElsewhere() ??
    (await waitForMail(
      (m) =>
        (m.subject ?? '').startsWith('Waiting for you:') &&
        recipients(m).some((to) => to.toLowerCase() === email) &&
        (m.text ?? '').includes(session.sessionId),
      30000,
      `"Waiting for you: ..." message to ${email}`,
    ));
  if (typeof mail === 'string') {
    note(`e-mail not checked: ${mail}.`);
  } else {
    const link = /https?:\/\/\S+\/inbox\?\S+/.exec(mail.text ?? '')?.[0];
    const target = link ? new URL(link).searchParams : undefined;
    if (!link || target?.get('session') !== session.sessionId || target.get('step') !== pending.stepId) {
      throw new DemoError(`the e-mail "${mail.subject}" has no link to the step in the inbox: ${JSON.stringify(mail.text)}`);
    }
    show('e-mail', `"${mail.subject}" (caught by the development mail catcher, ${MAIL_CATCHER}/)`);
    show('e-mail to', recipients(mail).join(', '));
    show('e-mail link', link);
  }
  const announced = await receiver.waitFor('human_step.pending', 30000, deliveryLog);
  show(
    'webhook',
    `human_step.pending ${announced.webhookId}, signature verified: step ${String(announced.data.stepId)} of ${String(announced.data.sessionId)}`,
  );

  // -- 9. a person completes it ----------------------------------------------------------------
  step('A person signs in to the dashboard (POST /api/auth/login) and approves it');
  const login = await expectStatus('POST /api/auth/login', anonymous.POST('/api/auth/login', { body: { email, password } }));
  const cookies = new Map(
    login.headers.getSetCookie().map((cookie) => {
      const [pair] = cookie.split(';');
      const at = pair!.indexOf('=');
      return [pair!.slice(0, at), pair!.slice(at + 1)] as const;
    }),
  );
  if (!cookies.get('session') || !cookies.get('csrf_token')) throw new DemoError('the login set no session and csrf_token cookies');
  show('signed in', `${login.body.account.email}, cookies: ${[...cookies.keys()].join(', ')} (values not shown), until ${login.body.expiresAt}`);
  const browser = { cookie: `session=${cookies.get('session')}; csrf_token=${cookies.get('csrf_token')}` };
  // The person's calls: the dashboard's cookie session (and its CSRF token) instead of a key.
  const person = createPlatformClient({ baseUrl: BASE, headers: browser });
  const seen = await expectStatus('GET /me/human-steps (cookie)', person.GET('/api/v1/me/human-steps'));
  show('inbox (cookie)', `${seen.body.humanSteps.length} pending human step(s)`);
  const approval = { approved: true, note: 'Wording is clear. Approved from the dashboard.' };
  completed = await expectStatus(
    'POST .../complete-step (cookie)',
    person.POST('/api/v1/cookbooks/sessions/{sessionId}/complete-step', {
      ...inSession,
      headers: { origin: new URL(BASE).origin, 'x-csrf-token': login.body.csrfToken },
      body: { stepId: pending.stepId, resultData: approval },
    }),
  ).catch((error: unknown) => {
    if (error instanceof DemoError && /csrf_failed/.test(error.message)) {
      throw new DemoError(`${error.message}\nThe Origin (${new URL(BASE).origin}) must be the edge's PUBLIC_URL origin; set DEMO_BASE_URL to it.`);
    }
    throw error;
  });
  show('approved', `${pending.stepId} -> next ${completed.body.nextStep?.stepId}, status ${completed.body.session.status}`);
  await stream.waitFor('human_step.completed');

  // -- 10. the last agent step -----------------------------------------------------------------
  step(`The agent sends the approved SMS through the proxy (POST /proxy/${SMS_API}/messages) and completes the session`);
  const sms = await call<{ messageIds: string[] }>('POST', `/proxy/${SMS_API}/messages`, {
    headers: auth,
    body: { to: draft.recipients, text: draft.message },
    expect: 201,
  });
  show('sent', `${sms.body.messageIds.length} messages (${sms.body.messageIds.join(', ')}), ${costHeaders(sms.headers)}`);
  if (upstream.sent.length !== draft.recipients.length) throw new DemoError(`the example upstream received ${upstream.sent.length} messages`);
  completed = await completeStep('send-sms', { messageIds: sms.body.messageIds });
  show(
    'completed',
    `send-sms -> status ${completed.body.session.status}, progress ${completed.body.session.progress.completed}/${completed.body.session.progress.total}`,
  );

  // -- 11. the session completes ---------------------------------------------------------------
  step('The session completes and the event stream ends');
  await stream.waitFor('session.completed');
  const events = await Promise.race([
    stream.done,
    new Promise<never>((_, reject) => setTimeout(() => reject(new DemoError('the event stream did not end after session.completed')), 10000)),
  ]);
  show('events', `${events.length} events, ids ${events[0]?.id}..${events[events.length - 1]?.id}, the stream closed`);
  const final = await expectStatus('GET /cookbooks/sessions/{sessionId}', api.GET('/api/v1/cookbooks/sessions/{sessionId}', inSession));
  show('session', `status=${final.body.session.status} endedAt=${final.body.session.endedAt}`);
  for (const s of final.body.session.steps) note(`${s.stepId.padEnd(18)} ${s.status.padEnd(10)} ${s.completedAt}`);
  if (final.body.session.status !== 'completed') throw new DemoError(`the session ended as ${final.body.session.status}`);
  const active = await expectStatus('GET /cookbooks/sessions', api.GET('/api/v1/cookbooks/sessions'));
  show('active sessions', `${active.body.sessions.length} (nextCursor ${active.body.nextCursor})`);

  // -- 12. usage and balance -------------------------------------------------------------------
  step('Read usage (after the usage worker aggregates) and the balance (GET /usage, GET /balance)');
  const deadline = Date.now() + 30000;
  let usage;
  for (;;) {
    usage = await expectStatus('GET /usage', api.GET('/api/v1/usage', { params: { query: { days: 1 } } }));
    if (usage.body.totals.calls >= 2) break;
    if (Date.now() > deadline)
      throw new DemoError(`usage still shows ${usage.body.totals.calls} calls after 30s: is the queue worker running? ${JSON.stringify(usage.body)}`);
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  show('usage totals', usage.body.totals);
  for (const row of usage.body.byApi) note(`${row.apiId.padEnd(14)} ${row.calls} call(s), $${row.cost}`);
  const balance = await expectStatus('GET /balance', api.GET('/api/v1/balance'));
  show('balance', `$${balance.body.balance} (from $${registered.body.balance}: instructions, two proxied calls, cookbook details)`);

  // -- 13. the same through MCP ----------------------------------------------------------------
  step('An MCP client (the official TypeScript SDK) connects to POST /mcp with the same key');
  const mcp = new McpClient({ name: 'platform-demo', version: '1.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${BASE}/mcp`), { authProvider: { token: async () => key } }));
  try {
    const { tools } = await mcp.listTools();
    show('tools', `${tools.length}: ${tools.map((tool) => tool.name).join(', ')}`);
    const viaMcp = (await mcp.callTool({ name: 'discover_apis', arguments: { query: 'send an sms', limit: 3 } })) as {
      structuredContent?: { results: { api: { id: string } }[] };
    };
    show('discover_apis', (viaMcp.structuredContent?.results ?? []).map((result) => result.api.id).join(', '));
    const balanceViaMcp = (await mcp.callTool({ name: 'get_balance', arguments: {} })) as { structuredContent?: { balance: number } };
    show('get_balance', `$${balanceViaMcp.structuredContent?.balance} (the same account, the same ledger)`);
  } finally {
    await mcp.close();
  }

  await oauthWalk(provider, { api, auth, person, csrfToken: login.body.csrfToken, sessionCookie: cookies.get('session')! });
  console.log(`\n${bold('Demo complete.')}`);
}

// ---------------------------------------------------------------------------------------------
// The last part: an agent asks a person for an OAuth connection, the person grants it from the inbox.

interface Parties {
  /** The agent's client (its API key) and the key's Authorization header for proxied calls. */
  api: PlatformClient;
  auth: Record<string, string>;
  /** The person's client (the dashboard's cookie session), its CSRF token, and the session cookie alone. */
  person: PlatformClient;
  csrfToken: string;
  sessionCookie: string;
}

async function oauthWalk(provider: TestOAuthProvider, { api, auth, person, csrfToken, sessionCookie }: Parties) {
  const onApi = { params: { path: { id: OAUTH_API } } };

  // -- operator: an OAuth provider, its app and an API ---------------------------------------
  step('Operator: a real OAuth provider on 127.0.0.1, its OAuth app and an OAuth API (npm run api -- oauth-app set, add)');
  show('provider', `${provider.issuer} (oidc-provider: login and consent forms, PKCE required; a resource server at /api checks each token)`);
  const appArgs = [
    'oauth-app',
    'set',
    '--provider',
    provider.host,
    '--client-id',
    provider.clientId,
    '--client-secret-stdin',
    '--authorization-url',
    provider.authorizationUrl,
    '--token-url',
    provider.tokenUrl,
    '--revocation-url',
    provider.revocationUrl,
  ];
  const registeredApp = await operatorCli(appArgs, provider.clientSecret);
  if (!registeredApp.ok) throw new DemoError(`npm run api -- oauth-app set failed:\n${registeredApp.out.trim()}`);
  if (registeredApp.out.includes(provider.clientSecret)) throw new DemoError('npm run api -- oauth-app set printed the client secret');
  show('npm run api -- oauth-app set', `${provider.host}, client ${provider.clientId} (secret piped on stdin, not shown)`);
  show('redirect URI', `${API}/oauth/callback`);
  await registerUpstreamApi(
    OAUTH_API,
    'Demo Things',
    provider.resourceUrl,
    OAUTH_PRICE,
    'productivity',
    "Example OAuth 2 API: a person's things at the demo provider.",
    [
      '--byok-price',
      OAUTH_PRICE,
      '--oauth-authorization-url',
      provider.authorizationUrl,
      '--oauth-token-url',
      provider.tokenUrl,
      '--oauth-scopes',
      'read',
    ],
  );

  // -- the agent: needs OAuth, and its call says how to get it --------------------------------
  step(`Agent: can it call ${OAUTH_API}? (GET /apis/${OAUTH_API}, then GET /proxy/${OAUTH_API}/things)`);
  const before = await expectStatus('GET /apis/{id}', api.GET('/api/v1/apis/{id}', onApi));
  const state = before.body.api.callability;
  show('callability', `${state.state} (${state.reason}), provider ${state.provider ?? '?'}`);
  if (state.hint) note(state.hint);
  if (state.state !== 'needs_oauth') throw new DemoError(`${OAUTH_API} is ${state.state}, expected needs_oauth: ${JSON.stringify(state)}`);
  const refused = await call<{ error: string; code: string; hint?: string }>('GET', `/proxy/${OAUTH_API}/things`, { headers: auth, expect: 409 });
  show('proxied call', `409 ${refused.body.code}: ${refused.body.error}`);
  if (refused.body.hint) note(refused.body.hint);
  if (refused.body.code !== 'connection_required') throw new DemoError(`expected connection_required: ${JSON.stringify(refused.body)}`);

  // -- the agent asks a person ------------------------------------------------------------------
  step(`Agent: ask a person to connect it (POST /connect/${OAUTH_API}/request), then wait (GET /connect/requests/{id}?wait=30)`);
  const purpose = 'List your things every morning and summarise what changed overnight. Read only.';
  const asked = await expectStatus(
    'POST /connect/{apiId}/request',
    api.POST('/api/v1/connect/{apiId}/request', { params: { path: { apiId: OAUTH_API } }, body: { purpose } }),
    201,
  );
  const request = asked.body.request;
  show(
    'request',
    `${request.id} ${request.status}, ${request.authKind} via ${request.oauthProvider}, scopes ${request.scopes.join(', ') || "(the API's)"}`,
  );
  show('purpose', request.purpose);
  show('link for a person', request.connectUrl);
  // The agent's long poll runs while the person acts; it answers as soon as the request is answered.
  const waitStarted = Date.now();
  const waited = expectStatus(
    'GET /connect/requests/{id}?wait=30',
    api.GET('/api/v1/connect/requests/{requestId}', { params: { path: { requestId: request.id }, query: { wait: 30 } } }),
  );
  waited.catch(() => undefined);
  note('long poll open: the agent waits for the answer');

  // -- the person: the inbox, then consent at the provider ---------------------------------------
  step('Person: sees it in the inbox (GET /connect/requests, cookie) and starts consent (POST /oauth/authorize)');
  const inbox = await expectStatus('GET /connect/requests (cookie)', person.GET('/api/v1/connect/requests'));
  const listed = inbox.body.requests.find((r) => r.id === request.id);
  if (!listed) throw new DemoError(`the inbox does not list request ${request.id}: ${JSON.stringify(inbox.body).slice(0, 400)}`);
  show(
    'inbox',
    `"Connect ${listed.apiName}" (${listed.status}, ${listed.authKind === 'oauth' ? 'OAuth sign-in' : listed.authKind}): ${listed.purpose}`,
  );
  const started = await expectStatus(
    'POST /oauth/authorize (cookie)',
    person.POST('/api/v1/oauth/authorize', {
      headers: { origin: new URL(BASE).origin, 'x-csrf-token': csrfToken },
      body: { apiId: OAUTH_API, connectRequestId: request.id, returnTo: '/inbox' },
    }),
  );
  const authorizationUrl = new URL(started.body.authorizationUrl);
  show('consent', `${started.body.provider} as "${started.body.label}", scopes ${started.body.scopes.join(' ')}, until ${started.body.expiresAt}`);
  show(
    'go to',
    `${authorizationUrl.origin}${authorizationUrl.pathname} (PKCE ${authorizationUrl.searchParams.get('code_challenge_method')}; state and challenge not shown)`,
  );

  step('Person: signs in and allows at the provider, and comes back through GET /oauth/callback');
  let callback: URL;
  try {
    callback = await provider.authorize(authorizationUrl.href);
  } catch (error) {
    throw new DemoError(`at the provider: ${(error as Error).message}`);
  }
  if (`${callback.origin}${callback.pathname}` !== `${API}/oauth/callback`)
    throw new DemoError(`the provider sent the browser to ${callback.origin}${callback.pathname}, not ${API}/oauth/callback`);
  if (callback.searchParams.has('error'))
    throw new DemoError(`the provider answered ${callback.searchParams.get('error')}: ${callback.searchParams.get('error_description')}`);
  show('at the provider', 'login form, then consent form (Allow): redirected back with a code (not shown)');
  let landed: Response;
  try {
    // The browser's top-level navigation back: the session cookie is all it carries.
    landed = await fetch(callback, { redirect: 'manual', headers: { cookie: `session=${sessionCookie}` } });
  } catch (error) {
    throw notRunning('GET /oauth/callback', error);
  }
  const landing = new URL(landed.headers.get('location') ?? '/', BASE);
  if (landed.status !== 303 || landing.searchParams.get('oauth') !== 'connected') {
    throw new DemoError(
      `GET /oauth/callback answered ${landed.status} to ${landing.pathname}${landing.search}: ${(await landed.text()).slice(0, 300)}`,
    );
  }
  show('callback', `303 to ${landing.pathname}?oauth=${landing.searchParams.get('oauth')} (the dashboard's inbox says it is connected)`);

  // -- the agent hears and calls ---------------------------------------------------------------
  step(`Agent: its wait answers, ${OAUTH_API} is ready, and the call goes through with the token`);
  const outcome = await waited;
  show(
    'request',
    `${outcome.body.request.status} after ${((Date.now() - waitStarted) / 1000).toFixed(1)} s of waiting (resolved ${outcome.body.request.resolvedAt})`,
  );
  if (outcome.body.request.status !== 'connected') throw new DemoError(`the request ended ${outcome.body.request.status}, expected connected`);
  const after = await expectStatus('GET /apis/{id}', api.GET('/api/v1/apis/{id}', onApi));
  show('callability', `${after.body.api.callability.state} (${after.body.api.callability.reason})`);
  if (after.body.api.callability.state !== 'ready') throw new DemoError(`${OAUTH_API} is ${after.body.api.callability.state} after the consent`);
  const calls = provider.resourceCalls.length;
  const proxied = await call<{ ok: boolean; path: string; subject: string; scope: string }>('GET', `/proxy/${OAUTH_API}/things`, { headers: auth });
  const seen = provider.resourceCalls[calls];
  if (!seen) throw new DemoError("the proxied call did not reach the provider's resource server");
  if (!seen.valid) throw new DemoError('the resource server refused the token the platform sent');
  if (seen.token && JSON.stringify(proxied.body).includes(seen.token)) throw new DemoError('the answer carried the access token');
  show('status', `${proxied.status}, X-Service-Api: ${proxied.headers.get('x-service-api')}`);
  show('resource server', `a valid bearer token for "${seen.accountId}" with scope "${seen.scope}" (the token is not shown)`);
  show('answer', proxied.body);
  show('charged', costHeaders(proxied.headers));
  if (!proxied.headers.get('x-service-cost')) throw new DemoError('the proxied call carried no X-Service-Cost header');
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(
      `\n${bold('Demo failed')} at step ${stepNo}: ${error instanceof DemoError ? error.message : ((error as Error).stack ?? String(error))}`,
    );
    process.exit(1);
  },
);
