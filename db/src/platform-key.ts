import { createCipheriv, randomBytes } from 'node:crypto';

/**
 * Encrypts an operator's upstream key for `apis.platform_key_encrypted`: AES-256-GCM under the
 * connections master key (32 bytes, given as 64 hex digits). Layout: 12-byte IV, 16-byte tag, ciphertext.
 */
export function encryptPlatformKey(masterKeyHex: string, secret: string): Buffer {
  const key = Buffer.from(masterKeyHex, 'hex');
  if (key.length !== 32) throw new Error('the connections master key must be 64 hex digits (32 bytes)');
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return Buffer.concat([iv, cipher.getAuthTag(), ciphertext]);
}
