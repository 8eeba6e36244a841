import {
  countWebhookEndpoints,
  deleteWebhookEndpoint,
  findWebhookEndpoint,
  getEmailPreferences,
  insertWebhookEndpoint,
  listDeliveries,
  listWebhookEndpoints,
  newWebhookId,
  recentEventsOfType,
  recordWebhookEventFor,
  resetDelivery,
  rotateWebhookSecret,
  setEmailPreferences,
  updateWebhookEndpoint,
  type DeliveryRow,
  type WebhookEndpointRow,
} from '#db/webhooks';
import type { Db, Sql } from '#db/sql';
import { notFound, PlatformError } from '#core/platform';
import { newWebhookSecret, sealWebhookSecret } from './webhooks.js';

// The account's webhook endpoints and e-mail choices, as /webhooks and /notifications/email manage
// them: the limits and the not-found and conflict answers live here, the SQL in db/webhooks.

export type { DeliveryRow, WebhookEndpointRow };

/** Test deliveries are counted over the last hour (WEBHOOK_TEST_DELIVERIES_PER_HOUR). */
const TEST_WINDOW_SECONDS = 3_600;

/** How long the previous secret keeps signing after a rotation, so receivers can switch without a gap. */
const ROTATION_OVERLAP_MS = 24 * 3_600_000;

const missingEndpoint = (id: string) => notFound(`Webhook ${id}`, 'List yours with GET /api/v1/webhooks.');
const disabledEndpoint = () =>
  new PlatformError('conflict', 'This endpoint is disabled', { hint: 'Enable it first: PATCH /api/v1/webhooks/{id} {"enabled": true}.' });

/** The owner's address and the event types e-mailed to it. */
export async function emailPreferences(db: Db, accountId: string): Promise<{ email: string; eventTypes: string[] }> {
  const preferences = await getEmailPreferences(db, accountId);
  if (!preferences) throw new PlatformError('invalid_session', 'Account no longer exists');
  return preferences;
}

/** Chooses the event types e-mailed to the owner (duplicates dropped); answers the owner's address and the choice. */
export async function chooseEmailedEvents<T extends string>(db: Db, accountId: string, eventTypes: T[]): Promise<{ email: string; eventTypes: T[] }> {
  const chosen = [...new Set(eventTypes)];
  await setEmailPreferences(db, accountId, chosen);
  const preferences = await getEmailPreferences(db, accountId);
  return { email: preferences?.email ?? '', eventTypes: chosen };
}

/** Registers an endpoint (its URL already checked), up to maxEndpoints per account; the secret is answered this once. */
export async function createWebhookEndpoint(
  db: Db,
  settings: { WEBHOOK_MAX_ENDPOINTS: number; CONNECTIONS_MASTER_KEY: Buffer },
  accountId: string,
  input: { url: string; description?: string | undefined; eventTypes: string[] },
): Promise<{ row: WebhookEndpointRow; secret: string }> {
  if ((await countWebhookEndpoints(db, accountId)) >= settings.WEBHOOK_MAX_ENDPOINTS) {
    throw new PlatformError('conflict', `An account may have at most ${settings.WEBHOOK_MAX_ENDPOINTS} webhook endpoints`, {
      hint: 'Delete one, or listen to more event types on one endpoint.',
    });
  }
  const id = newWebhookId();
  const secret = newWebhookSecret();
  const row = await insertWebhookEndpoint(db, {
    id,
    accountId,
    url: input.url,
    description: input.description ?? '',
    eventTypes: [...new Set(input.eventTypes)],
    secretSealed: sealWebhookSecret(settings.CONNECTIONS_MASTER_KEY, id, secret),
  });
  return { row, secret };
}

/** The account's endpoints, oldest first. */
export function listWebhooks(db: Db, accountId: string): Promise<WebhookEndpointRow[]> {
  return listWebhookEndpoints(db, accountId);
}

/** One of the account's endpoints; 404 for another's or none. */
export async function requireWebhookEndpoint(db: Db, accountId: string, id: string): Promise<WebhookEndpointRow> {
  const row = await findWebhookEndpoint(db, accountId, id);
  if (!row) throw missingEndpoint(id);
  return row;
}

/** Changes an endpoint (its new URL already checked); 404 for another's or none. */
export async function changeWebhookEndpoint(
  db: Db,
  accountId: string,
  id: string,
  change: { url?: string; description?: string; eventTypes?: string[]; enabled?: boolean },
): Promise<WebhookEndpointRow> {
  const row = await updateWebhookEndpoint(
    db,
    accountId,
    id,
    change.eventTypes === undefined ? change : { ...change, eventTypes: [...new Set(change.eventTypes)] },
  );
  if (!row) throw missingEndpoint(id);
  return row;
}

/** Deletes an endpoint and its delivery log; 404 for another's or none. */
export async function removeWebhookEndpoint(db: Db, accountId: string, id: string): Promise<void> {
  if (!(await deleteWebhookEndpoint(db, accountId, id))) throw missingEndpoint(id);
}

/** A new signing secret; the previous one keeps signing for a day. 404 for another's endpoint or none. */
export async function rotateSigningSecret(
  db: Db,
  masterKey: Buffer,
  accountId: string,
  id: string,
): Promise<{ secret: string; previousSecretValidUntil: Date }> {
  const secret = newWebhookSecret();
  const until = new Date(Date.now() + ROTATION_OVERLAP_MS);
  if (!(await rotateWebhookSecret(db, accountId, id, sealWebhookSecret(masterKey, id, secret), until))) throw missingEndpoint(id);
  return { secret, previousSecretValidUntil: until };
}

/**
 * Records a webhook.test event for one enabled endpoint; its delivery is then to be queued. At most
 * `perHour` per account in any hour (429 with Retry-After past it).
 */
export async function recordTestEvent(sql: Sql, accountId: string, id: string, perHour: number): Promise<DeliveryRow> {
  const endpoint = await requireWebhookEndpoint(sql, accountId, id);
  if (endpoint.status !== 'enabled') throw disabledEndpoint();
  // A test delivery is free and makes us call out to a URL the account chose: capped per account,
  // counted under a lock so racing tests cannot all pass the count.
  return sql.begin(async (tx) => {
    await tx`select pg_advisory_xact_lock(hashtextextended(${`webhook-test:${accountId}`}, 0))`;
    const recent = await recentEventsOfType(tx, accountId, 'webhook.test', TEST_WINDOW_SECONDS);
    if (recent.count >= perHour) {
      throw new PlatformError(
        'rate_limited',
        `This account has sent ${recent.count} test deliveries in the last hour, the most it may (${perHour})`,
        {
          hint: `The next test delivery can be sent in ${recent.firstLeavesInSeconds} seconds (Retry-After), when the oldest of them is an hour old; real events are delivered meanwhile as usual.`,
          headers: { 'Retry-After': String(recent.firstLeavesInSeconds) },
        },
      );
    }
    return recordWebhookEventFor(tx, endpoint, { type: 'webhook.test', data: { message: 'A test event sent from the API or the dashboard.' } });
  });
}

/** A page of an endpoint's delivery log, newest first; 404 for another's endpoint or none. */
export async function deliveryPage(
  db: Db,
  accountId: string,
  id: string,
  page: { limit: number; cursor?: string | undefined },
): Promise<{ deliveries: DeliveryRow[]; nextCursor: string | null }> {
  const endpoint = await requireWebhookEndpoint(db, accountId, id);
  const rows = await listDeliveries(db, endpoint.id, page.limit + 1, page.cursor ?? null);
  const deliveries = rows.slice(0, page.limit);
  return { deliveries, nextCursor: rows.length > page.limit ? deliveries[deliveries.length - 1]!.id : null };
}

/** Sets a settled delivery of an enabled endpoint pending again (to be queued); 409 while it is being sent or when it is not this endpoint's. */
export async function retryDelivery(db: Db, accountId: string, id: string, deliveryId: string): Promise<DeliveryRow> {
  const endpoint = await requireWebhookEndpoint(db, accountId, id);
  if (endpoint.status !== 'enabled') throw disabledEndpoint();
  const delivery = await resetDelivery(db, endpoint.id, deliveryId);
  if (!delivery) {
    throw new PlatformError('conflict', `Delivery ${deliveryId} is still being sent, or is not this endpoint's`, {
      hint: `Its attempts show in GET /api/v1/webhooks/${endpoint.id}/deliveries; retry it once it has succeeded or failed.`,
    });
  }
  return delivery;
}
