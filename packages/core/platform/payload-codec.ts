import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { DataConverter, Payload, PayloadCodec } from '@temporalio/common';
// A CommonJS package: Node's ESM loader offers only its default export.
import proto from '@temporalio/proto';
import { z } from 'zod';

/** Metadata `encoding` of a payload this codec encrypted. */
export const ENCRYPTED_ENCODING = 'binary/encrypted';
/** Metadata key naming the key that encrypted a payload, so keys can rotate. */
export const KEY_ID_METADATA = 'encryption-key-id';

const { temporal } = proto;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const encoder = new TextEncoder();
const decoder = new TextDecoder();

/**
 * The development key set. It is public (it is in this file), so production refuses it: see
 * `isDevCodecKeys` and the settings checks of the edge and the workers.
 */
export const DEV_CODEC_KEYS = 'dev-2026:6465762d6f6e6c792d74656d706f72616c2d636f6465632d6b65792d30303031';

export interface CodecKey {
  id: string;
  key: Buffer;
}

/**
 * Parses `TEMPORAL_CODEC_KEYS`: comma-separated `id:key` pairs, each key 32 bytes as 64 hex digits
 * or base64. The first key encrypts; every key listed decrypts (rotation: put the new key first and
 * keep the old ones until no open workflow's history needs them).
 */
export function parseCodecKeys(text: string): CodecKey[] {
  const keys = text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      const at = entry.indexOf(':');
      if (at <= 0) throw new Error('each entry is id:key');
      const id = entry.slice(0, at);
      const raw = entry.slice(at + 1);
      if (!/^[A-Za-z0-9._-]{1,64}$/.test(id)) throw new Error(`key id "${id}" must be 1-64 letters, digits, dots, dashes or underscores`);
      const key = /^[0-9a-f]{64}$/i.test(raw) ? Buffer.from(raw, 'hex') : Buffer.from(raw, 'base64');
      if (key.length !== 32) throw new Error(`key "${id}" must be 32 bytes (64 hex digits or base64)`);
      return { id, key };
    });
  if (keys.length === 0) throw new Error('at least one key is needed');
  if (new Set(keys.map((k) => k.id)).size !== keys.length) throw new Error('key ids must be unique');
  return keys;
}

/** The setting, shared by every process that talks to Temporal (the edge's client and the workers). */
export const codecKeysSetting = z
  .string()
  .default(DEV_CODEC_KEYS)
  .transform((text, ctx) => {
    try {
      return parseCodecKeys(text);
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: `TEMPORAL_CODEC_KEYS: ${(error as Error).message}` });
      return z.NEVER;
    }
  });

export const isDevCodecKeys = (keys: CodecKey[]) => keys.some((key) => parseCodecKeys(DEV_CODEC_KEYS).some((dev) => dev.key.equals(key.key)));

/**
 * Encrypts every payload Temporal stores (workflow arguments and results, Update arguments and
 * results, activity inputs and outputs: step resultData and whatever an agent or a person typed)
 * with AES-256-GCM, the way Temporal's documentation does it for sensitive data. The encrypted
 * payload's data is IV + ciphertext + tag of the whole original payload (its own metadata
 * included); its metadata says `binary/encrypted` and the key id. Payloads without that encoding
 * are passed through on decode, so histories written before the codec stay readable.
 */
export class EncryptionCodec implements PayloadCodec {
  private readonly byId: Map<string, Buffer>;
  private readonly current: CodecKey;

  constructor(keys: CodecKey[]) {
    if (keys.length === 0) throw new Error('EncryptionCodec needs a key');
    this.current = keys[0]!;
    this.byId = new Map(keys.map((key) => [key.id, key.key]));
  }

  async encode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => {
      const plain = temporal.api.common.v1.Payload.encode(payload).finish();
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', this.current.key, iv);
      const data = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
      return { metadata: { encoding: encoder.encode(ENCRYPTED_ENCODING), [KEY_ID_METADATA]: encoder.encode(this.current.id) }, data };
    });
  }

  async decode(payloads: Payload[]): Promise<Payload[]> {
    return payloads.map((payload) => {
      const encoding = payload.metadata?.encoding;
      if (!encoding || decoder.decode(encoding) !== ENCRYPTED_ENCODING) return payload;
      const keyIdBytes = payload.metadata?.[KEY_ID_METADATA];
      const keyId = keyIdBytes ? decoder.decode(keyIdBytes) : '';
      const key = this.byId.get(keyId);
      if (!key) throw new Error(`payload encrypted with key "${keyId}", which TEMPORAL_CODEC_KEYS does not list`);
      const data = Buffer.from(payload.data ?? new Uint8Array());
      if (data.length < IV_BYTES + TAG_BYTES) throw new Error('encrypted payload is too short');
      const decipher = createDecipheriv('aes-256-gcm', key, data.subarray(0, IV_BYTES));
      decipher.setAuthTag(data.subarray(data.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(data.subarray(IV_BYTES, data.length - TAG_BYTES)), decipher.final()]);
      return temporal.api.common.v1.Payload.decode(plain) as Payload;
    });
  }
}

/** The data converter of every Temporal client and worker of the platform. */
export function temporalDataConverter(keys: CodecKey[]): DataConverter {
  return { payloadCodecs: [new EncryptionCodec(keys)] };
}

/**
 * Payloads in the JSON form of Temporal's codec server protocol (proto3 JSON: bytes as base64), as
 * the Temporal UI and CLI send them to a remote codec endpoint.
 */
export const codecServerBody = z.object({
  payloads: z.array(z.object({ metadata: z.record(z.string(), z.string()).optional(), data: z.string().optional() })).max(1_000),
});
export type CodecServerBody = z.infer<typeof codecServerBody>;

export function fromCodecJson(body: CodecServerBody): Payload[] {
  return body.payloads.map((payload) => ({
    metadata: Object.fromEntries(Object.entries(payload.metadata ?? {}).map(([name, value]) => [name, new Uint8Array(Buffer.from(value, 'base64'))])),
    data: new Uint8Array(Buffer.from(payload.data ?? '', 'base64')),
  }));
}

export function toCodecJson(payloads: Payload[]): CodecServerBody {
  return {
    payloads: payloads.map((payload) => ({
      metadata: Object.fromEntries(
        Object.entries(payload.metadata ?? {}).map(([name, value]) => [name, Buffer.from(value ?? new Uint8Array()).toString('base64')]),
      ),
      data: Buffer.from(payload.data ?? new Uint8Array()).toString('base64'),
    })),
  };
}
