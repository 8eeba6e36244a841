import type { Queue } from 'bullmq';
import { addEmail, type WebhookEventType } from '#core/notifications';
import type { ConnectionTransition } from './deps.js';

/** The dashboard link that reconnects a connection in one step (Connections, the connection's consent flow started). */
export const reconnectLink = (publicUrl: string, connectionId: string) =>
  `${new URL(publicUrl).origin}/connections?reconnect=${encodeURIComponent(connectionId)}`;

/**
 * The webhook event id of a change of standing: the connection, the change and the time it was
 * committed, so the same change always has the same id (recording it twice is a no-op, and so is
 * mailing it twice) and a later change of the same connection has another.
 */
export const transitionEventId = (change: ConnectionTransition) =>
  `msg_${change.type === 'connection.refresh_failed' ? 'conn_failed' : 'conn_recovered'}_${change.connection.id.replace(/-/g, '')}_${change.connection.updatedAt.getTime()}`;

/** What a webhook receiver gets: who, which connection and why; never a token. */
export function transitionData(change: ConnectionTransition, publicUrl: string): Record<string, unknown> {
  const { connection } = change;
  const base = { connectionId: connection.id, provider: connection.provider, label: connection.label, status: connection.status };
  if (change.type === 'connection.recovered') return base;
  return {
    ...base,
    reason: connection.statusReason ?? 'The provider refused to renew the access',
    reconnectUrl: reconnectLink(publicUrl, connection.id),
  };
}

/**
 * Builds OAuthDeps.transition: a change of a connection's standing becomes a webhook event
 * (connection.refresh_failed, connection.recovered) and, for a failure, an e-mail to the account's
 * owner with the one-step reconnect link. Best effort and never throws: the change stands, and the
 * dashboard shows it, even when telling fails (logged).
 */
export function connectionNotifier(input: {
  webhooks: { emit(accountId: string, type: WebhookEventType, data: Record<string, unknown>, id?: string): Promise<number> };
  emails: Queue;
  publicUrl: string;
  log: { warn(object: Record<string, unknown>, message: string): void };
}): (change: ConnectionTransition) => Promise<void> {
  return async (change) => {
    const id = transitionEventId(change);
    const { accountId } = change.connection;
    try {
      await input.webhooks.emit(accountId, change.type, transitionData(change, input.publicUrl), id);
    } catch (error) {
      input.log.warn({ err: error, type: change.type, connectionId: change.connection.id }, 'connection webhook event not recorded or not queued');
    }
    if (change.type !== 'connection.refresh_failed') return;
    try {
      await addEmail(input.emails, { kind: 'connection-refresh-failed', accountId, connectionId: change.connection.id, eventId: id });
    } catch (error) {
      input.log.warn({ err: error, connectionId: change.connection.id }, 'connection refresh failure e-mail not queued');
    }
  };
}
