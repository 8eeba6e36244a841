import type { AddressInfo } from 'node:net';
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { simpleParser, type ParsedMail } from 'mailparser';
import pino from 'pino';
import { SMTPServer } from 'smtp-server';
import type { Sql } from '#db/sql';
import { emailProcessor } from '#workers/queues/email';
import { loadWorkerSettings } from '#workers/settings';
import { testDatabaseUrl } from './settings.js';

/** A real SMTP server in the test process (smtp-server), keeping every message it accepts, parsed. */
export interface MailServer {
  url: string;
  messages: ParsedMail[];
  /** Resolves with the first message (already arrived or still to come) that matches. */
  waitFor(match: (mail: ParsedMail) => boolean, timeoutMs?: number): Promise<ParsedMail>;
  close(): Promise<void>;
}

export async function startMailServer(): Promise<MailServer> {
  const messages: ParsedMail[] = [];
  const waiters = new Set<() => void>();
  const server = new SMTPServer({
    disabledCommands: ['STARTTLS', 'AUTH'],
    authOptional: true,
    onData(stream, _session, callback) {
      simpleParser(stream)
        .then((mail) => {
          messages.push(mail);
          for (const wake of waiters) wake();
          callback();
        })
        .catch((error: Error) => callback(error));
    },
  });
  server.on('error', () => {});
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.server.address() as AddressInfo;
  return {
    url: `smtp://127.0.0.1:${port}`,
    messages,
    waitFor(match, timeoutMs = 15_000) {
      return new Promise((resolve, reject) => {
        const check = () => {
          const found = messages.find(match);
          if (!found) return false;
          waiters.delete(check);
          clearTimeout(timer);
          resolve(found);
          return true;
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`no matching e-mail within ${timeoutMs} ms; received: ${messages.map((m) => m.subject).join(' | ') || 'nothing'}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

export const recipientOf = (mail: ParsedMail) => (Array.isArray(mail.to) ? mail.to.map((a) => a.text).join(', ') : (mail.to?.text ?? ''));

/** The invitation link of an approver invitation e-mail, and its token. */
export function inviteLinkIn(mail: ParsedMail): { link: string; token: string } {
  const link = /https?:\/\/\S+\/accept-invite#token=[A-Za-z0-9_-]+/.exec(mail.text ?? '')?.[0];
  if (!link) throw new Error(`no invitation link in: ${mail.text}`);
  return { link, token: link.slice(link.indexOf('#token=') + '#token='.length) };
}

/** The e-mail queue's processor on a BullMQ worker of the test's own, sending to `smtpUrl`. */
export function startEmailWorker(input: { sql: Sql; redis: Redis; redisPrefix: string; smtpUrl: string; publicUrl: string }): Worker {
  const settings = loadWorkerSettings({
    ...process.env,
    DATABASE_URL: testDatabaseUrl(),
    REDIS_PREFIX: input.redisPrefix,
    SMTP_URL: input.smtpUrl,
    PUBLIC_URL: input.publicUrl,
  });
  const processor = emailProcessor({ sql: input.sql, redis: input.redis, settings, log: pino({ level: 'silent' }) });
  const worker = new Worker(processor.job.queue, processor.process, { connection: input.redis, prefix: input.redisPrefix, concurrency: 2 });
  worker.on('error', () => {});
  return worker;
}
