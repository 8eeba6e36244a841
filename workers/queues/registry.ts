import type { QueueDeps, QueueProcessor } from './definitions.js';
import { directoryIndexingProcessor } from './directory-indexing.js';
import { autoTopupProcessor, reconcileAutoTopupsProcessor } from './auto-topup.js';
import { emailProcessor } from './email.js';
import { oauthRenewalProcessor } from './oauth-renewal.js';
import { webhookDeliveryProcessor, webhookSweepProcessor } from './webhooks.js';
import { reconcileProcessor, refundProcessor } from './refunds.js';
import { retentionProcessor } from './retention.js';
import { usageProcessor } from './usage.js';

/** Every job the queue-worker process serves: one line per declared job. */
export function queueProcessors(deps: QueueDeps): QueueProcessor[] {
  return [
    usageProcessor(deps),
    directoryIndexingProcessor(deps),
    refundProcessor(deps),
    reconcileProcessor(deps),
    retentionProcessor(deps),
    emailProcessor(deps),
    webhookDeliveryProcessor(deps),
    webhookSweepProcessor(deps),
    autoTopupProcessor(deps),
    reconcileAutoTopupsProcessor(deps),
    oauthRenewalProcessor(deps),
  ];
}
