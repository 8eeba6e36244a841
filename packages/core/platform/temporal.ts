import { Client, Connection } from '@temporalio/client';
import type { DataConverter } from '@temporalio/common';

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
  ) {
    this.connection = Connection.lazy({ address, connectTimeout: 2_000 });
    this.client = new Client({ connection: this.connection, namespace, ...(dataConverter ? { dataConverter } : {}) });
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
