export { emailJob, enqueueEmail } from './email-job.js';
export type { EmailPayload } from './email-job.js';
export { Mailer } from './mailer.js';
export type { OutgoingMessage } from './mailer.js';
export { memberInviteMessage } from './messages.js';
export { emailSettings } from './settings.js';
export type { EmailSettings } from './settings.js';
