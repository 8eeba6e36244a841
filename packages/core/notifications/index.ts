export { addEmail, EMAILED_SESSION_EVENTS, emailJob, enqueueEmail } from './email-job.js';
export type { EmailedSessionEvent, EmailPayload } from './email-job.js';
export { Mailer } from './mailer.js';
export type { OutgoingMessage } from './mailer.js';
export {
  accountDeletedMessage,
  accountEventMessage,
  emailChangeMessage,
  emailChangedMessage,
  emailVerifyMessage,
  connectRequestMessage,
  connectionRefreshFailedMessage,
  humanStepMessage,
  loginAlertMessage,
  memberInviteMessage,
  passwordResetMessage,
  topupFailedMessage,
  webhookDisabledMessage,
} from './messages.js';
export { emailSettings } from './settings.js';
export type { EmailSettings } from './settings.js';
export {
  EMAILABLE_EVENT_TYPES,
  WEBHOOK_EVENT_TYPES,
  WebhookEmitter,
  deliveryJobOptions,
  enqueueDeliveries,
  newWebhookSecret,
  sealWebhookSecret,
  signWebhook,
  webhookDeliveryJob,
  webhookSecretContext,
  webhookSettings,
} from './webhooks.js';
export type { WebhookEventType, WebhookSettings } from './webhooks.js';
export {
  changeWebhookEndpoint,
  chooseEmailedEvents,
  createWebhookEndpoint,
  deliveryPage,
  emailPreferences,
  listWebhooks,
  recordTestEvent,
  removeWebhookEndpoint,
  requireWebhookEndpoint,
  retryDelivery,
  rotateSigningSecret,
} from './webhook-endpoints.js';
export type { DeliveryRow, WebhookEndpointRow } from './webhook-endpoints.js';
