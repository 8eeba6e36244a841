import { readFileSync } from 'node:fs';
import { Client, Connection, type TLSConfig, type WorkflowClientInterceptor } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';
import { SettingsError } from './settings.js';

export interface TemporalTlsSettings {
  TEMPORAL_TLS?: boolean;
  TEMPORAL_TLS_CA_FILE?: string;
  TEMPORAL_TLS_CERT_FILE?: string;
  TEMPORAL_TLS_KEY_FILE?: string;
  TEMPORAL_TLS_SERVER_NAME?: string;
}

/**
 * TLS, and mTLS with a client certificate, for a real Temporal cluster (the dev server is plain
 * gRPC on 127.0.0.1). The same settings serve the edge's client and the worker's connection.
 * Returns undefined when no TLS setting is given.
 */
export function temporalTls(settings: TemporalTlsSettings): TLSConfig | undefined {
  const { TEMPORAL_TLS_CA_FILE: ca, TEMPORAL_TLS_CERT_FILE: cert, TEMPORAL_TLS_KEY_FILE: key, TEMPORAL_TLS_SERVER_NAME: serverName } = settings;
  if (!settings.TEMPORAL_TLS && !ca && !cert && !key && !serverName) return undefined;
  if (Boolean(cert) !== Boolean(key))
    throw new SettingsError('TEMPORAL_TLS_CERT_FILE and TEMPORAL_TLS_KEY_FILE go together (the client certificate for mTLS and its key)');
  const read = (name: string, path: string) => {
    try {
      return readFileSync(path);
    } catch (error) {
      throw new SettingsError(`${name}: cannot read ${path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  };
  return {
    ...(serverName ? { serverNameOverride: serverName } : {}),
    ...(ca ? { serverRootCACertificate: read('TEMPORAL_TLS_CA_FILE', ca) } : {}),
    ...(cert && key ? { clientCertPair: { crt: read('TEMPORAL_TLS_CERT_FILE', cert), key: read('TEMPORAL_TLS_KEY_FILE', key) } } : {}),
  };
}

/**
 * The edge's handle on Temporal. The connection is lazy, so the edge starts and serves even while
 * Temporal is down (health reports it degraded, session starts answer 503).
 */
export class TemporalGateway {
  readonly connection: Connection;
  readonly client: Client;

  constructor(
    readonly address: string,
    readonly namespace: string,
    readonly taskQueue: string,
    /** The platform's payload codec (payload-codec.ts): what the client sends is encrypted, what it reads decrypted. */
    dataConverter?: DataConverter,
    /** temporalTls(settings): TLS or mTLS to a real cluster; plain gRPC when undefined. */
    tls?: TLSConfig,
    /** Interceptors of workflow calls: tracing's (Tracing.workflowClientInterceptor) when it is on. */
    workflowInterceptors: WorkflowClientInterceptor[] = [],
  ) {
    this.connection = Connection.lazy({ address, connectTimeout: 2_000, ...(tls ? { tls } : {}) });
    this.client = new Client({
      connection: this.connection,
      namespace,
      ...(dataConverter ? { dataConverter } : {}),
      ...(workflowInterceptors.length > 0 ? { interceptors: { workflow: workflowInterceptors } } : {}),
    });
  }

  /** Resolves when the frontend answers a health check within `timeoutMs`; rejects otherwise. */
  async check(timeoutMs = 1_500): Promise<void> {
    await this.connection.withDeadline(Date.now() + timeoutMs, async () => {
      await this.connection.ensureConnected();
      await this.connection.workflowService.getSystemInfo({});
    });
  }

  async close(): Promise<void> {
    await this.connection.close().catch(() => {});
  }
}
