import nodemailer, { type Transporter } from 'nodemailer';
import type { EmailSettings } from './settings.js';

export interface OutgoingMessage {
  to: string;
  subject: string;
  text: string;
  html: string;
}

/** Sends mail over SMTP (nodemailer), pooled: one transport per process. */
export class Mailer {
  private readonly transport: Transporter;

  constructor(private readonly settings: Pick<EmailSettings, 'SMTP_URL' | 'MAIL_FROM'>) {
    const url = new URL(settings.SMTP_URL);
    const secure = url.protocol === 'smtps:';
    this.transport = nodemailer.createTransport({
      host: url.hostname,
      port: url.port ? Number(url.port) : secure ? 465 : 587,
      secure,
      // A plain smtp:// server must upgrade with STARTTLS (a stripped upgrade would expose the
      // password and the invitation links), except on this machine (the development catcher).
      requireTLS: !secure && !['127.0.0.1', 'localhost', '::1', '[::1]'].includes(url.hostname),
      ...(url.username ? { auth: { user: decodeURIComponent(url.username), pass: decodeURIComponent(url.password) } } : {}),
      // Timeouts short enough that a dead server fails the job quickly (the queue retries it)
      // instead of holding a worker slot for minutes.
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
    });
  }

  /** Sends one message; resolves with the server's message id, rejects on refusal or timeout. */
  async send(message: OutgoingMessage): Promise<string> {
    const info = (await this.transport.sendMail({ from: this.settings.MAIL_FROM, ...message })) as { messageId: string };
    return info.messageId;
  }

  close(): void {
    this.transport.close();
  }
}
