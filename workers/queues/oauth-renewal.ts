import type { Queue } from 'bullmq';
import { emailJob, WebhookEmitter } from '#core/notifications';
import { connectionNotifier, OAuthClients, oauthRenewalJob, renewDueConnections, type OAuthDeps } from '#core/oauth';
import { createQueue } from '#core/platform';
import { publishOAuthConnectionChange } from '#db/oauth';
import { processorFor, type QueueDeps, type QueueProcessor } from './definitions.js';

/**
 * OAuth access tokens renewed ahead of expiry (and idle refresh tokens once a day): a repeatable run
 * of core's renewDueConnections, with the worker's own openid-client side. Renewals are announced to
 * the edges (which cache connections) through Redis, and a connection that comes to need a person
 * tells its account (webhooks and e-mail) like an edge would.
 */
export function oauthRenewalProcessor({ sql, redis, settings, log }: QueueDeps): QueueProcessor {
  let clients: OAuthClients | null = null;
  let webhooks: WebhookEmitter | null = null;
  let emails: Queue | null = null;
  let deps: OAuthDeps | null = null;

  const oauthDeps = (): OAuthDeps => {
    if (deps) return deps;
    clients = new OAuthClients(settings);
    webhooks = new WebhookEmitter(sql, redis, settings.REDIS_PREFIX, settings);
    emails = createQueue(emailJob.queue, { connection: redis, prefix: settings.REDIS_PREFIX }, log);
    deps = {
      sql,
      clients,
      settings,
      log,
      // The edges also drop cached connections after CONNECTION_CACHE_TTL_MS: a lost announcement only delays them.
      announce: (accountId, provider) =>
        publishOAuthConnectionChange(redis, settings.REDIS_PREFIX, accountId, provider).catch((error: unknown) =>
          log.warn({ err: error, provider }, 'OAuth connection change not announced to the edges'),
        ),
      transition: connectionNotifier({ webhooks, emails, publicUrl: settings.PUBLIC_URL, log }),
    };
    return deps;
  };

  return processorFor(
    oauthRenewalJob,
    async (_payload, job) => {
      const tally = await renewDueConnections(oauthDeps(), settings);
      if (tally.examined > 0) {
        log.info({ jobId: job.id, ...tally }, 'OAuth token renewal run');
        await job.log(JSON.stringify(tally));
      }
      return tally;
    },
    { concurrency: 1 },
  );
}
