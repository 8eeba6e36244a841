import { describe, expect, it } from 'vitest';
import { billingMode, signupCreditMicros } from '#core/billing';
import { DEV_CODEC_KEYS } from '#core/platform';
import { loadEdgeSettings } from '#edge/config';
import { loadWorkerSettings } from '#workers/settings';

const codecKeys = `prod-1:${'cd'.repeat(32)}`;
const production = { NODE_ENV: 'production', SESSION_SECRET: 's'.repeat(40), TEMPORAL_CODEC_KEYS: codecKeys };
const key = 'ab'.repeat(32);

describe('money settings', () => {
  it('requires a real CONNECTIONS_MASTER_KEY in production and refuses private upstreams there', () => {
    expect(() => loadEdgeSettings(production)).toThrow(/CONNECTIONS_MASTER_KEY/);
    expect(() => loadEdgeSettings({ ...production, CONNECTIONS_MASTER_KEY: '' })).toThrow(/CONNECTIONS_MASTER_KEY/);
    expect(() => loadEdgeSettings({ ...production, CONNECTIONS_MASTER_KEY: key, ALLOW_PRIVATE_UPSTREAMS: 'true' })).toThrow(
      /ALLOW_PRIVATE_UPSTREAMS/,
    );
    const settings = loadEdgeSettings({ ...production, CONNECTIONS_MASTER_KEY: key });
    expect(settings.CONNECTIONS_MASTER_KEY.equals(Buffer.from(key, 'hex'))).toBe(true);
    expect(settings.ALLOW_PRIVATE_UPSTREAMS).toBe(false);
    // No sandbox default in production: unset means live billing, and no sign-up credit.
    expect(settings.BILLING_MODE).toBeUndefined();
    expect(billingMode(settings)).toBe('live');
    expect(signupCreditMicros(settings)).toBe(0n);
  });

  it('makes the workers, which seal platform keys at import, refuse the development key in production too', () => {
    expect(() => loadWorkerSettings({ NODE_ENV: 'production', TEMPORAL_CODEC_KEYS: codecKeys })).toThrow(/CONNECTIONS_MASTER_KEY/);
    expect(
      loadWorkerSettings({ NODE_ENV: 'production', CONNECTIONS_MASTER_KEY: key, TEMPORAL_CODEC_KEYS: codecKeys }).CONNECTIONS_MASTER_KEY.equals(
        Buffer.from(key, 'hex'),
      ),
    ).toBe(true);
    expect(loadWorkerSettings({}).NODE_ENV).toBe('development');
  });

  it('reads an empty optional setting as unset, as docker-compose passes OPERATOR_BASIC_AUTH=${OPERATOR_BASIC_AUTH:-}', () => {
    const settings = loadEdgeSettings({ ...production, CONNECTIONS_MASTER_KEY: key, OPERATOR_BASIC_AUTH: '', DASHBOARD_DIST: '' });
    expect(settings.OPERATOR_BASIC_AUTH).toBeUndefined();
    expect(settings.DASHBOARD_DIST).toBeUndefined();
    expect(loadEdgeSettings({ OPERATOR_BASIC_AUTH: 'ops:secret' }).OPERATOR_BASIC_AUTH).toBe('ops:secret');
    expect(() => loadEdgeSettings({ OPERATOR_BASIC_AUTH: 'no-colon' })).toThrow(/OPERATOR_BASIC_AUTH/);
  });

  it('refuses the public development codec key in production, in the edge and the workers, and names a bad key list', () => {
    const { TEMPORAL_CODEC_KEYS: _set, ...withoutCodecKeys } = production;
    expect(() => loadEdgeSettings({ ...withoutCodecKeys, CONNECTIONS_MASTER_KEY: key })).toThrow(/TEMPORAL_CODEC_KEYS/);
    expect(() => loadWorkerSettings({ NODE_ENV: 'production', CONNECTIONS_MASTER_KEY: key })).toThrow(/TEMPORAL_CODEC_KEYS/);
    // Keeping the development key as an old, decrypt-only key is refused too: it is public.
    expect(() => loadEdgeSettings({ ...production, CONNECTIONS_MASTER_KEY: key, TEMPORAL_CODEC_KEYS: `${codecKeys},${DEV_CODEC_KEYS}` })).toThrow(
      /TEMPORAL_CODEC_KEYS/,
    );
    expect(() => loadEdgeSettings({ TEMPORAL_CODEC_KEYS: 'k1:tooshort' })).toThrow(/TEMPORAL_CODEC_KEYS: key "k1" must be 32 bytes/);
    expect(loadEdgeSettings({ ...production, CONNECTIONS_MASTER_KEY: key }).TEMPORAL_CODEC_KEYS.map((k) => k.id)).toEqual(['prod-1']);
  });

  it('accepts base64 keys and names a bad one', () => {
    expect(loadEdgeSettings({ CONNECTIONS_MASTER_KEY: Buffer.alloc(32, 9).toString('base64') }).CONNECTIONS_MASTER_KEY.length).toBe(32);
    expect(() => loadEdgeSettings({ CONNECTIONS_MASTER_KEY: 'too-short' })).toThrow(/CONNECTIONS_MASTER_KEY/);
    expect(() => loadEdgeSettings({ BILLING_MODE: 'free' })).toThrow(/BILLING_MODE/);
  });
});
