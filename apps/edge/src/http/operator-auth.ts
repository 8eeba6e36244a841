import { timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { PlatformError } from '#core/platform';
import type { RateLimiter } from '../plugins/rate-limit.js';
import { clientAddress } from '../plugins/rate-limit.js';

function safeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  return left.length === right.length && timingSafeEqual(left, right);
}

/**
 * Checks HTTP Basic credentials against OPERATOR_BASIC_AUTH (`user:password`), the login of every
 * operator surface on the edge (the queue board, the Temporal codec server). Throws a 401 with a
 * Basic challenge naming `realm`; wrong passwords are throttled per address like dashboard logins.
 */
export async function requireOperator(
  request: FastifyRequest,
  reply: FastifyReply,
  options: { expected: string; realm: string; surface: string; rateLimiter: RateLimiter },
): Promise<void> {
  const header = request.headers.authorization ?? '';
  const match = /^Basic\s+(\S+)$/i.exec(header);
  const given = match?.[1] ? Buffer.from(match[1], 'base64').toString('utf8') : '';
  if (safeEqual(given, options.expected)) return;
  // Throws 429 once an address has guessed too often.
  await options.rateLimiter.consume(request, reply, 'login', `operator:${clientAddress(request.ip)}`);
  throw new PlatformError('missing_credentials', 'Operator login required', {
    hint: `${options.surface} uses HTTP Basic auth with the OPERATOR_BASIC_AUTH setting.`,
    headers: { 'WWW-Authenticate': `Basic realm="${options.realm}", charset="UTF-8"` },
  });
}
