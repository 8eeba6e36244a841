// The part of oidc-provider (v9, which ships no types) the platform uses: the edge's authorization
// server for MCP clients (this folder) and the loopback test provider (packages/fixtures/oidc-provider.ts).
declare module 'oidc-provider' {
  import type { IncomingMessage, ServerResponse } from 'node:http';

  export interface InteractionDetails {
    uid: string;
    prompt: { name: string; details: Record<string, unknown>; reasons?: string[] };
    params: Record<string, unknown>;
    session?: { accountId?: string; uid?: string };
    grantId?: string;
    returnTo: string;
    exp: number;
    result?: Record<string, unknown>;
    lastSubmission?: Record<string, unknown>;
    save(ttl: number): Promise<string>;
    destroy(): Promise<void>;
  }

  export interface StoredToken {
    jti: string;
    accountId?: string;
    clientId?: string;
    grantId?: string;
    scope?: string;
    kind: string;
    aud?: string | string[];
    /** Seconds since the epoch. */
    exp?: number;
    isExpired: boolean;
    isValid: boolean;
    /** Forgets this one token (its grant and the grant's other tokens stay). */
    destroy(): Promise<void>;
  }

  export interface ClientInstance {
    clientId: string;
    clientName?: string;
    redirectUris: string[];
    clientUri?: string;
    logoUri?: string;
    grantTypeAllowed(grant: string): boolean;
    /** Set (true) when the client came from a Client ID Metadata Document. */
    clientIdMetadataDocument?: boolean;
    /** The client's registered metadata, in its wire names (client_name, redirect_uris, ...). */
    metadata(): Record<string, unknown>;
  }

  export class Grant {
    constructor(properties: { accountId: string; clientId: string });
    jti: string;
    accountId: string;
    clientId: string;
    /** Expiry (seconds since the epoch), set by the first save; save() keeps the time left to it. */
    exp?: number;
    addOIDCScope(scope: string): void;
    addResourceScope(resource: string, scope: string): void;
    save(): Promise<string>;
    static find(id: string): Promise<Grant | undefined>;
  }

  export interface AdapterPayload extends Record<string, unknown> {
    grantId?: string;
    userCode?: string;
    uid?: string;
    consumed?: unknown;
  }

  export interface Adapter {
    upsert(id: string, payload: AdapterPayload, expiresIn: number | undefined): Promise<void>;
    find(id: string): Promise<AdapterPayload | undefined>;
    findByUserCode(userCode: string): Promise<AdapterPayload | undefined>;
    findByUid(uid: string): Promise<AdapterPayload | undefined>;
    consume(id: string): Promise<void>;
    destroy(id: string): Promise<void>;
    revokeByGrantId(grantId: string): Promise<void>;
  }

  export class Provider {
    constructor(issuer: string, configuration: Record<string, unknown>);
    readonly issuer: string;
    Grant: typeof Grant;
    AccessToken: { find(value: string): Promise<StoredToken | undefined> };
    ClientCredentials: { find(value: string): Promise<StoredToken | undefined> };
    RefreshToken: { find(value: string): Promise<StoredToken | undefined> };
    Interaction: { find(uid: string): Promise<InteractionDetails | undefined> };
    Client: { find(id: string): Promise<ClientInstance | undefined> };
    proxy: boolean;
    callback(): (req: IncomingMessage, res: ServerResponse) => void;
    interactionDetails(req: IncomingMessage, res: ServerResponse): Promise<InteractionDetails>;
    interactionFinished(
      req: IncomingMessage,
      res: ServerResponse,
      result: Record<string, unknown>,
      options?: { mergeWithLastSubmission?: boolean },
    ): Promise<void>;
    on(event: string, listener: (...args: unknown[]) => void): this;
  }

  export const errors: Record<string, new (...args: unknown[]) => Error>;
}
