import { z } from 'zod';

/** E-mail settings, shared by the worker that sends mail and the edge that asks for it. */
export const emailSettings = z.object({
  /**
   * Where mail goes: an SMTP URL (smtp:// or smtps://, credentials in the URL). The default is the
   * development mail catcher that `npm run up` starts (scripts/mail-catcher.ts).
   */
  SMTP_URL: z
    .string()
    .url()
    .refine((value) => /^smtps?:$/.test(new URL(value).protocol), 'must be an smtp:// or smtps:// URL')
    .default('smtp://127.0.0.1:1025'),
  /** The From header of every message. */
  MAIL_FROM: z.string().min(3).default('Service <no-reply@service.localhost>'),
  /** How long an approver's invitation link works. */
  INVITE_TTL_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 30)
    .default(72),
  /** How long a password reset link works (it also stops working once used or replaced by a newer one). */
  PASSWORD_RESET_TTL_MINUTES: z.coerce
    .number()
    .int()
    .min(5)
    .max(24 * 60)
    .default(60),
  /** How long an e-mail verification link and an e-mail change confirmation link work. */
  EMAIL_VERIFY_TTL_HOURS: z.coerce
    .number()
    .int()
    .min(1)
    .max(24 * 30)
    .default(48),
});

export type EmailSettings = z.output<typeof emailSettings>;
