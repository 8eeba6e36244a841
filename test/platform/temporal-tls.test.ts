import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TemporalGateway, temporalTls } from '#core/platform';

// TLS and mTLS to a real Temporal cluster: settings to TLS options, and proof the edge's client
// really speaks TLS when they are set (the plain-gRPC dev server then refuses the handshake).

describe('Temporal TLS settings', () => {
  const dir = mkdtempSync(join(tmpdir(), 'temporal-tls-'));
  const cert = join(dir, 'client.pem');
  const key = join(dir, 'client.key');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-subj',
      '/CN=platform-worker',
      '-days',
      '1',
      '-keyout',
      key,
      '-out',
      cert,
    ],
    { stdio: 'ignore' },
  );
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('reads the CA, the client certificate pair and the server name, and names what is wrong', () => {
    expect(temporalTls({})).toBeUndefined();
    expect(temporalTls({ TEMPORAL_TLS: true })).toEqual({});
    const tls = temporalTls({
      TEMPORAL_TLS_CA_FILE: cert,
      TEMPORAL_TLS_CERT_FILE: cert,
      TEMPORAL_TLS_KEY_FILE: key,
      TEMPORAL_TLS_SERVER_NAME: 'temporal.internal',
    })!;
    expect(tls.serverNameOverride).toBe('temporal.internal');
    expect(Buffer.from(tls.serverRootCACertificate!).toString()).toContain('BEGIN CERTIFICATE');
    expect(Buffer.from(tls.clientCertPair!.key).toString()).toContain('PRIVATE KEY');
    expect(() => temporalTls({ TEMPORAL_TLS_CERT_FILE: cert })).toThrow(/TEMPORAL_TLS_KEY_FILE go together/);
    expect(() => temporalTls({ TEMPORAL_TLS_CA_FILE: join(dir, 'missing.pem') })).toThrow(
      /TEMPORAL_TLS_CA_FILE: cannot read .*missing\.pem \(ENOENT\)/,
    );
  });

  it('makes the client speak TLS: the plain dev server answers without it and refuses the handshake with it', async () => {
    const address = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
    const plain = new TemporalGateway(address, 'default', 'tls-probe');
    const tls = new TemporalGateway(
      address,
      'default',
      'tls-probe',
      undefined,
      temporalTls({ TEMPORAL_TLS_CA_FILE: cert, TEMPORAL_TLS_CERT_FILE: cert, TEMPORAL_TLS_KEY_FILE: key }),
    );
    try {
      await expect(plain.check(5_000)).resolves.toBeUndefined();
      await expect(tls.check(3_000)).rejects.toThrow();
    } finally {
      await Promise.all([plain.close(), tls.close()]);
    }
  });
});
