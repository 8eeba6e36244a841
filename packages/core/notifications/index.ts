export { addEmail, EMAILED_SESSION_EVENTS, emailJob, enqueueEmail } from './email-job.js';
export type { EmailedSessionEvent, EmailPayload } from './email-job.js';
export { Mailer } from './mailer.js';
export type { OutgoingMessage } from './mailer.js';
export { humanStepMessage, memberInviteMessage } from './messages.js';
export { emailSettings } from './settings.js';
export type { EmailSettings } from './settings.js';
