// The development mail catcher `npm run up` starts when SMTP_URL is not set: an SMTP server on
// MAIL_CATCHER_SMTP_PORT (1025) that accepts every message and keeps the last 200 in memory, and a
// page on MAIL_CATCHER_HTTP_PORT (1080) that lists them, newest first, with their text and links.
// Nothing is delivered anywhere; it is for reading what the platform would have sent.
import { createServer } from 'node:http';
import { simpleParser, type ParsedMail } from 'mailparser';
import { SMTPServer } from 'smtp-server';

const SMTP_PORT = Number(process.env.MAIL_CATCHER_SMTP_PORT ?? 1025);
const HTTP_PORT = Number(process.env.MAIL_CATCHER_HTTP_PORT ?? 1080);
const KEEP = 200;

interface Caught {
  id: number;
  receivedAt: Date;
  mail: ParsedMail;
}
const caught: Caught[] = [];
let nextId = 1;

const smtp = new SMTPServer({
  // Plain SMTP on loopback: no STARTTLS (nodemailer would refuse a self-signed certificate) and no login.
  disabledCommands: ['STARTTLS', 'AUTH'],
  authOptional: true,
  banner: 'development mail catcher: nothing is delivered',
  size: 10 * 1024 * 1024,
  onData(stream, _session, callback) {
    simpleParser(stream)
      .then((mail) => {
        caught.unshift({ id: nextId++, receivedAt: new Date(), mail });
        caught.length = Math.min(caught.length, KEEP);
        const to = Array.isArray(mail.to) ? mail.to.map((a) => a.text).join(', ') : (mail.to?.text ?? '');
        console.log(`caught mail to ${to}: ${mail.subject ?? '(no subject)'}   (read it at http://127.0.0.1:${HTTP_PORT}/)`);
        callback();
      })
      .catch((error: Error) => callback(error));
  },
});

const escape = (text: string) => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
const linkify = (text: string) => escape(text).replace(/https?:\/\/[^\s<]+/g, (url) => `<a href="${url}">${url}</a>`);

const page = () => `<!doctype html><meta charset="utf-8"><title>Mail catcher</title>
<style>body{font:15px system-ui;margin:2rem auto;max-width:50rem;padding:0 1rem}article{border:1px solid #ccc;border-radius:6px;padding:1rem;margin:1rem 0}pre{white-space:pre-wrap}</style>
<h1>Mail catcher</h1><p>${caught.length} message(s) kept in memory, newest first; SMTP on 127.0.0.1:${SMTP_PORT}.</p>
${caught
  .map(({ id, receivedAt, mail }) => {
    const to = Array.isArray(mail.to) ? mail.to.map((a) => a.text).join(', ') : (mail.to?.text ?? '');
    return `<article id="m${id}"><h2>${escape(mail.subject ?? '(no subject)')}</h2><p>To ${escape(to)} · ${receivedAt.toISOString()}</p><pre>${linkify(mail.text ?? '')}</pre></article>`;
  })
  .join('\n')}`;

const http = createServer((request, response) => {
  if (request.url === '/messages.json') {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify(caught.map(({ id, receivedAt, mail }) => ({ id, receivedAt, subject: mail.subject, to: mail.to, text: mail.text }))));
    return;
  }
  response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  response.end(page());
});

smtp.on('error', (error) => console.error(`mail catcher SMTP error: ${error.message}`));
smtp.listen(SMTP_PORT, '127.0.0.1', () => console.log(`SMTP on 127.0.0.1:${SMTP_PORT}, messages at http://127.0.0.1:${HTTP_PORT}/`));
http.listen(HTTP_PORT, '127.0.0.1');
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.on(signal, () => {
    smtp.close(() => process.exit(0));
    http.close();
  });
}
