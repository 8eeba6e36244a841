import { newId } from '#contracts/key-format';
import type { Db, Sql } from './sql.js';

export interface WebhookEndpointRow {
  id: string;
  account_id: string;
  url: string;
  description: string;
  event_types: string[];
  status: 'enabled' | 'disabled';
  disabled_reason: string | null;
  last_success_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

export interface WebhookSecretsRow {
  secret_sealed: Buffer;
  previous_secret_sealed: Buffer | null;
  previous_expires_at: Date | null;
}

const ENDPOINT_COLUMNS = 'id, account_id, url, description, event_types, status, disabled_reason, last_success_at, created_at, updated_at';

export async function countWebhookEndpoints(db: Db, accountId: string): Promise<number> {
  const [row] = await db<{ count: number }[]>`select count(*)::int as count from webhook_endpoints where account_id = ${accountId}`;
  return row?.count ?? 0;
}

export async function insertWebhookEndpoint(
  db: Db,
  input: { id: string; accountId: string; url: string; description: string; eventTypes: string[]; secretSealed: Buffer },
): Promise<WebhookEndpointRow> {
  const [row] = await db<WebhookEndpointRow[]>`
    insert into webhook_endpoints (id, account_id, url, description, event_types, secret_sealed)
    values (${input.id}, ${input.accountId}, ${input.url}, ${input.description}, ${input.eventTypes}, ${input.secretSealed})
    returning ${db.unsafe(ENDPOINT_COLUMNS)}`;
  if (!row) throw new Error('insert returned no row');
  return row;
}

export async function listWebhookEndpoints(db: Db, accountId: string): Promise<WebhookEndpointRow[]> {
  return db<WebhookEndpointRow[]>`
    select ${db.unsafe(ENDPOINT_COLUMNS)} from webhook_endpoints where account_id = ${accountId} order by created_at, id`;
}

export async function findWebhookEndpoint(db: Db, accountId: string, id: string): Promise<WebhookEndpointRow | null> {
  const [row] = await db<WebhookEndpointRow[]>`
    select ${db.unsafe(ENDPOINT_COLUMNS)} from webhook_endpoints where id = ${id} and account_id = ${accountId}`;
  return row ?? null;
}

export async function findWebhookEndpointById(db: Db, id: string): Promise<WebhookEndpointRow | null> {
  const [row] = await db<WebhookEndpointRow[]>`select ${db.unsafe(ENDPOINT_COLUMNS)} from webhook_endpoints where id = ${id}`;
  return row ?? null;
}

export async function updateWebhookEndpoint(
  db: Db,
  accountId: string,
  id: string,
  change: { url?: string; description?: string; eventTypes?: string[]; enabled?: boolean },
): Promise<WebhookEndpointRow | null> {
  const [row] = await db<WebhookEndpointRow[]>`
    update webhook_endpoints set
      url = coalesce(${change.url ?? null}, url),
      description = coalesce(${change.description ?? null}, description),
      event_types = coalesce(${change.eventTypes ?? null}::text[], event_types),
      status = case when ${change.enabled ?? null}::boolean is null then status
                    when ${change.enabled ?? null}::boolean then 'enabled' else 'disabled' end,
      disabled_reason = case when ${change.enabled ?? null}::boolean is null then disabled_reason
                             when ${change.enabled ?? null}::boolean then null else 'disabled by the account' end,
      updated_at = now()
    where id = ${id} and account_id = ${accountId}
    returning ${db.unsafe(ENDPOINT_COLUMNS)}`;
  return row ?? null;
}

export async function deleteWebhookEndpoint(db: Db, accountId: string, id: string): Promise<boolean> {
  const rows = await db`delete from webhook_endpoints where id = ${id} and account_id = ${accountId} returning id`;
  return rows.length > 0;
}

/** Replaces the signing secret; the old one keeps signing beside it until `previousUntil`. */
export async function rotateWebhookSecret(db: Db, accountId: string, id: string, secretSealed: Buffer, previousUntil: Date): Promise<boolean> {
  const rows = await db`
    update webhook_endpoints
       set previous_secret_sealed = secret_sealed, previous_expires_at = ${previousUntil}, secret_sealed = ${secretSealed}, updated_at = now()
     where id = ${id} and account_id = ${accountId} returning id`;
  return rows.length > 0;
}

/**
 * Records an event and one pending delivery per enabled endpoint of the account that listens to its
 * type, in one transaction. An event id already recorded (a retried activity) adds nothing and
 * returns no deliveries. Returns the new deliveries' ids.
 */
export async function recordWebhookEvent(
  sql: Sql,
  event: { id: string; accountId: string; type: string; payload: Record<string, unknown> },
): Promise<string[]> {
  return sql.begin(async (db) => {
    const inserted = await db`
      insert into webhook_events (id, account_id, type, payload)
      select ${event.id}, ${event.accountId}, ${event.type}, ${db.json(event.payload as never)}
       where exists (select 1 from webhook_endpoints
                      where account_id = ${event.accountId} and status = 'enabled' and ${event.type} = any(event_types))
      on conflict (id) do nothing returning id`;
    if (inserted.length === 0) return [];
    const deliveries = await db<{ id: string }[]>`
      insert into webhook_deliveries (id, event_id, endpoint_id)
      select 'whd_' || substr(md5(${event.id} || e.id), 1, 20), ${event.id}, e.id from webhook_endpoints e
       where e.account_id = ${event.accountId} and e.status = 'enabled' and ${event.type} = any(e.event_types)
      on conflict (event_id, endpoint_id) do nothing returning id`;
    return deliveries.map((row) => row.id);
  }) as Promise<string[]>;
}

export interface DeliveryWorkRow {
  id: string;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  created_at: Date;
  event_id: string;
  event_type: string;
  event_created_at: Date;
  payload: Record<string, unknown>;
  endpoint_id: string;
  account_id: string;
  url: string;
  endpoint_status: 'enabled' | 'disabled';
  secret_sealed: Buffer;
  previous_secret_sealed: Buffer | null;
  previous_expires_at: Date | null;
  last_success_at: Date | null;
}

/** Everything one delivery attempt needs, or null when the delivery (or its endpoint) is gone. */
export async function loadDelivery(db: Db, deliveryId: string): Promise<DeliveryWorkRow | null> {
  const [row] = await db<DeliveryWorkRow[]>`
    select d.id, d.status, d.attempts, d.created_at, ev.id as event_id, ev.type as event_type, ev.created_at as event_created_at,
           ev.payload, e.id as endpoint_id, e.account_id, e.url, e.status as endpoint_status, e.secret_sealed,
           e.previous_secret_sealed, e.previous_expires_at, e.last_success_at
      from webhook_deliveries d
      join webhook_events ev on ev.id = d.event_id
      join webhook_endpoints e on e.id = d.endpoint_id
     where d.id = ${deliveryId}`;
  return row ?? null;
}

/** One attempt's outcome. A success also stamps the endpoint's last success. */
export async function recordDeliveryAttempt(
  db: Db,
  deliveryId: string,
  outcome: { ok: boolean; statusCode: number | null; error: string | null; final: boolean },
): Promise<void> {
  const status = outcome.ok ? 'succeeded' : outcome.final ? 'failed' : 'pending';
  const [row] = await db<{ endpoint_id: string }[]>`
    update webhook_deliveries set attempts = attempts + 1, status = ${status}, last_status_code = ${outcome.statusCode},
           last_error = ${outcome.error}, last_attempt_at = now(), delivered_at = case when ${outcome.ok} then now() else delivered_at end
     where id = ${deliveryId} and status <> 'succeeded' returning endpoint_id`;
  if (row && outcome.ok) await db`update webhook_endpoints set last_success_at = now() where id = ${row.endpoint_id}`;
}

/**
 * Disables an endpoint whose delivery failed for good when nothing reached it since that delivery
 * was created; true when it was disabled now (the account is then told).
 */
export async function disableFailingEndpoint(db: Db, endpointId: string, since: Date, reason: string): Promise<boolean> {
  const rows = await db`
    update webhook_endpoints set status = 'disabled', disabled_reason = ${reason}, updated_at = now()
     where id = ${endpointId} and status = 'enabled' and (last_success_at is null or last_success_at < ${since})
    returning id`;
  return rows.length > 0;
}

export interface DeliveryRow {
  id: string;
  event_id: string;
  event_type: string;
  status: 'pending' | 'succeeded' | 'failed';
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  last_attempt_at: Date | null;
  delivered_at: Date | null;
  created_at: Date;
}

/** An endpoint's deliveries, newest first, paged by (created_at, id). */
export async function listDeliveries(db: Db, endpointId: string, limit: number, before: string | null): Promise<DeliveryRow[]> {
  return db<DeliveryRow[]>`
    select d.id, d.event_id, ev.type as event_type, d.status, d.attempts, d.last_status_code, d.last_error,
           d.last_attempt_at, d.delivered_at, d.created_at
      from webhook_deliveries d join webhook_events ev on ev.id = d.event_id
     where d.endpoint_id = ${endpointId}
       and (${before}::text is null or (d.created_at, d.id) < (select created_at, id from webhook_deliveries where id = ${before}::text))
     order by d.created_at desc, d.id desc limit ${limit}`;
}

/**
 * Puts a finished delivery back to pending for a manual retry; null when there is no such delivery
 * or it is still pending (its own job is still at it: a second would send it twice).
 */
export async function resetDelivery(db: Db, endpointId: string, deliveryId: string): Promise<DeliveryRow | null> {
  const [row] = await db<DeliveryRow[]>`
    update webhook_deliveries d set status = 'pending'
      from webhook_events ev
     where d.id = ${deliveryId} and d.endpoint_id = ${endpointId} and ev.id = d.event_id and d.status <> 'pending'
    returning d.id, d.event_id, ev.type as event_type, d.status, d.attempts, d.last_status_code, d.last_error,
              d.last_attempt_at, d.delivered_at, d.created_at`;
  return row ?? null;
}

/** Pending deliveries older than `olderThan` (their job may have been lost): for the sweeper. */
export async function listStalePendingDeliveries(db: Db, olderThan: Date, limit: number): Promise<string[]> {
  const rows = await db<{ id: string }[]>`
    select id from webhook_deliveries where status = 'pending' and created_at < ${olderThan} order by created_at limit ${limit}`;
  return rows.map((row) => row.id);
}

export const newWebhookId = () => newId('whe');

/** Records an event for one endpoint only (a test event), with its pending delivery. */
export async function recordWebhookEventFor(
  db: Db,
  endpoint: { id: string; account_id: string },
  event: { type: string; data: Record<string, unknown> },
): Promise<DeliveryRow> {
  const id = `msg_${newId('t').slice(2)}`;
  const at = new Date().toISOString();
  await db`insert into webhook_events (id, account_id, type, payload)
           values (${id}, ${endpoint.account_id}, ${event.type}, ${db.json({ type: event.type, timestamp: at, data: event.data } as never)})`;
  const [row] = await db<DeliveryRow[]>`
    insert into webhook_deliveries (id, event_id, endpoint_id) values (${newId('whd')}, ${id}, ${endpoint.id})
    returning id, event_id, ${event.type}::text as event_type, status, attempts, last_status_code, last_error, last_attempt_at, delivered_at, created_at`;
  if (!row) throw new Error('insert returned no row');
  return row;
}

/**
 * The account's events of `type` in the last `windowSeconds`: how many, and in how many seconds the
 * oldest of them leaves the window (0 when there are none).
 */
export async function recentEventsOfType(
  db: Db,
  accountId: string,
  type: string,
  windowSeconds: number,
): Promise<{ count: number; firstLeavesInSeconds: number }> {
  const [row] = await db<{ count: number; leaves: number | null }[]>`
    select count(*)::int as count,
           ceil(extract(epoch from (min(created_at) + make_interval(secs => ${windowSeconds}) - now())))::int as leaves
    from webhook_events
    where account_id = ${accountId} and type = ${type} and created_at > now() - make_interval(secs => ${windowSeconds})`;
  return { count: row?.count ?? 0, firstLeavesInSeconds: Math.max(1, row?.leaves ?? 0) };
}

/** The event types an account also wants by e-mail, and its owner's address. */
export async function getEmailPreferences(db: Db, accountId: string): Promise<{ email: string; eventTypes: string[] } | null> {
  const [row] = await db<{ email: string; email_event_types: string[] }[]>`select email, email_event_types from accounts where id = ${accountId}`;
  return row ? { email: row.email, eventTypes: row.email_event_types } : null;
}

export async function setEmailPreferences(db: Db, accountId: string, eventTypes: string[]): Promise<void> {
  await db`update accounts set email_event_types = ${eventTypes} where id = ${accountId}`;
}
