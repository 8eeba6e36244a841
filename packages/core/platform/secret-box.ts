import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { z } from 'zod';

/**
 * AES-256-GCM for secrets at rest: bring-your-own upstream keys (`connections.key_encrypted`) and
 * operator platform keys (`apis.platform_key_encrypted`). Layout: version byte 1 | 12-byte IV |
 * 16-byte tag | ciphertext. The associated data binds a ciphertext to its row (account and API), so
 * a blob copied into another row does not decrypt.
 */
const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** Local-development master key; loadEdgeSettings refuses it in production. */
export const DEV_MASTER_KEY = '6465762d6f6e6c792d636f6e6e656374696f6e732d6d61737465722d6b657921';

/** CONNECTIONS_MASTER_KEY: 32 bytes written as 64 hex digits or base64. Parses to a Buffer. */
export const masterKeySetting = z
  // An empty value (as docker-compose passes an unset variable) means "not set".
  .preprocess((value) => (value === '' ? undefined : value), z.string().default(DEV_MASTER_KEY))
  .transform((value, ctx) => {
    const text = value.trim();
    const key = /^[0-9a-f]{64}$/i.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64');
    if (key.length !== 32) {
      ctx.addIssue({ code: 'custom', message: 'must be 32 bytes written as 64 hex digits or base64' });
      return z.NEVER;
    }
    return key;
  });

export const isDevMasterKey = (key: Buffer) => key.equals(Buffer.from(DEV_MASTER_KEY, 'hex'));

export function sealSecret(masterKey: Buffer, plaintext: string, context: string): Buffer {
  const iv = randomBytes(IV_BYTES);
  const cipher = createCipheriv('aes-256-gcm', masterKey, iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
  return Buffer.concat([Buffer.from([VERSION]), iv, cipher.getAuthTag(), ciphertext]);
}

/** Throws when the blob was not sealed under this key and context (tampered, moved or wrong key). */
export function openSecret(masterKey: Buffer, sealed: Buffer, context: string): string {
  if (sealed.length < 1 + IV_BYTES + TAG_BYTES || sealed[0] !== VERSION) throw new Error('unrecognised sealed secret');
  const iv = sealed.subarray(1, 1 + IV_BYTES);
  const tag = sealed.subarray(1 + IV_BYTES, 1 + IV_BYTES + TAG_BYTES);
  const decipher = createDecipheriv('aes-256-gcm', masterKey, iv);
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(tag);
  return Buffer.concat([decipher.update(sealed.subarray(1 + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
}

export const connectionContext = (accountId: string, apiId: string) => `connection:${accountId}:${apiId}`;
export const platformKeyContext = (apiId: string) => `platform-key:${apiId}`;

/** What lists show instead of a key: its last four characters, or nothing for short keys. */
export function keyHint(key: string): string {
  return key.length >= 12 ? `…${key.slice(-4)}` : '…';
}
