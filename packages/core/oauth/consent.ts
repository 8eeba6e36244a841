import { createHash, randomUUID } from 'node:crypto';
import * as oidc from 'openid-client';
import {
  findOAuthAppFor,
  getOAuthApp,
  getOAuthConnection,
  insertOAuthAuthorization,
  insertOAuthConnection,
  listOAuthConnections,
  lockOAuthConnection,
  providerDeclaredScopes,
  takeOAuthAuthorization,
  updateOAuthTokens,
  type OAuthAuthorizationRow,
} from '#db/oauth';
import { notFound, openSecret, PlatformError, sealSecret } from '#core/platform';
import { providerFailure } from './client.js';
import {
  assertLabel,
  checkScopes,
  expiryOf,
  grantedScopes,
  labelTaken,
  nextLabel,
  oauthConnectionView,
  resolveTarget,
  type ConnectionTarget,
  type OAuthConnectionView,
} from './connections.js';
import { oauthRedirectUri, type OAuthDeps } from './deps.js';
import { oauthVerifierContext, sealTokens } from './secrets.js';

/**
 * The consent flow: authorization code with PKCE (S256), as RFC 9700 asks of every client. A flow
 * starts from a person's dashboard session, which its `state` is bound to: the state (random, 256
 * bits) is stored only as a hash, with the session's hash, the sealed PKCE verifier, and what the
 * person asked for; the callback takes it once (deleted as it is read), refuses it after
 * FLOW_TTL_MS, and refuses it from any other session. Only then is the code exchanged.
 */

/** How long a person has to finish at the provider. */
export const FLOW_TTL_MS = 10 * 60_000;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** What is stored of a dashboard session to bind a flow to it (not the session id itself). */
export const sessionBinding = (sessionId: string) => sha256(`oauth-session:${sessionId}`);

export interface StartConsentInput extends ConnectionTarget {
  accountId: string;
  /** The dashboard session starting the flow: the callback must come back to the same one. */
  sessionId: string;
  personId: string | null;
  label?: string | undefined;
  /** The scopes the person picked; default: what the API's operations need (else all it declares). */
  scopes?: string[] | undefined;
  /** Re-authorise (reconnect, or widen the scopes of) this connection instead of making a new one. */
  connectionId?: string | undefined;
  /** The agent's connect request this flow answers, if any. */
  connectRequestId?: string | undefined;
  /** A dashboard path to come back to (default: the Connections page). */
  returnTo?: string | undefined;
}

export interface StartedConsent {
  authorizationUrl: string;
  provider: string;
  label: string;
  scopes: string[];
  expiresAt: Date;
}

/** A dashboard path (same origin, no scheme or host): anything else is ignored. */
export function safeReturnTo(value: string | undefined | null): string | null {
  if (!value || !/^\/(?![/\\])[\x21-\x7e]{0,500}$/.test(value)) return null;
  return value;
}

/** Starts a consent flow: records it and answers the provider's authorization URL to send the person to. */
export async function startConsent(deps: OAuthDeps, input: StartConsentInput): Promise<StartedConsent> {
  const existing = input.connectionId ? await getOAuthConnection(deps.sql, input.accountId, input.connectionId) : null;
  if (input.connectionId && !existing)
    throw notFound(`OAuth connection ${input.connectionId}`, 'GET /api/v1/me/connections lists your OAuth connections.');
  if (existing && existing.grantType !== 'authorization_code') {
    throw new PlatformError('validation_failed', 'A client-credentials connection has no consent to renew', {
      hint: 'Delete it and connect again with POST /api/v1/oauth/client-credentials.',
    });
  }
  const target = await resolveTarget(deps.sql, existing ? { ...input, provider: existing.provider } : input);
  const { provider } = target;
  const app = await findOAuthAppFor(deps.sql, input.accountId, provider);
  if (!app) {
    throw new PlatformError('oauth_not_configured', `No OAuth app is registered for ${provider}`, {
      hint: `The operator has not registered an app for ${provider}. You can bring your own: POST /api/v1/oauth/apps {"provider": "${provider}", "clientId": "...", "clientSecret": "...", "authorizationUrl": "...", "tokenUrl": "..."}.`,
    });
  }

  // Scopes: what the person picked (declared by the API), else what its operations need, else all it
  // declares; a provider named without an API takes any scope its APIs declare. A re-authorisation
  // keeps what the connection has (incremental consent), and the app's own scopes are always asked.
  let declared = target.declared;
  if (declared === null && input.scopes && input.scopes.length > 0) declared = await providerDeclaredScopes(deps.sql, provider);
  const picked = input.scopes && input.scopes.length > 0 ? checkScopes(input.scopes, declared, target.apiId ?? provider) : null;
  const wanted = picked ?? (target.operation.length > 0 ? target.operation : (target.declared ?? []));
  const scopes = [...new Set([...(existing?.scopes ?? []), ...wanted, ...app.defaultScopes])];

  let label: string;
  if (existing) label = existing.label;
  else if (input.label) {
    label = assertLabel(input.label);
    if ((await listOAuthConnections(deps.sql, input.accountId, provider)).some((c) => c.label === label)) throw labelTaken(provider, label);
  } else label = await nextLabel(deps.sql, input.accountId, provider);

  const state = oidc.randomState();
  const stateHash = sha256(state);
  const verifier = oidc.randomPKCECodeVerifier();
  const expiresAt = new Date(Date.now() + FLOW_TTL_MS);
  const configuration = deps.clients.configuration(app);
  await insertOAuthAuthorization(deps.sql, {
    stateHash,
    accountId: input.accountId,
    sessionHash: sessionBinding(input.sessionId),
    personId: input.personId,
    provider,
    apiId: target.apiId,
    appId: app.id,
    label,
    connectionId: existing?.id ?? null,
    scopes,
    codeVerifierSealed: sealSecret(deps.settings.CONNECTIONS_MASTER_KEY, verifier, oauthVerifierContext(stateHash)),
    connectRequestId: input.connectRequestId ?? null,
    returnTo: safeReturnTo(input.returnTo),
    expiresAt,
  });
  const url = oidc.buildAuthorizationUrl(configuration, {
    // The app's extra parameters first: the platform's own always win.
    ...app.authorizationParams,
    redirect_uri: oauthRedirectUri(deps.settings.PUBLIC_URL),
    ...(scopes.length > 0 ? { scope: scopes.join(' ') } : {}),
    state,
    code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
    code_challenge_method: 'S256',
  });
  return { authorizationUrl: url.href, provider, label, scopes, expiresAt };
}

/** Why a consent flow did not end in a connection: a stable code the dashboard turns into a sentence. */
export type ConsentFailure =
  | 'invalid_state'
  | 'expired'
  | 'session_mismatch'
  | 'access_denied'
  | 'provider_error'
  | 'exchange_failed'
  | 'provider_unreachable'
  | 'label_taken'
  | 'connection_gone';

export type ConsentOutcome =
  | {
      ok: true;
      connection: OAuthConnectionView;
      /** True for a new connection, false for a re-authorised one. */
      created: boolean;
      connectRequestId: string | null;
      returnTo: string | null;
    }
  | {
      ok: false;
      failure: ConsentFailure;
      /** The provider's OAuth error code (access_denied, invalid_scope, ...) where it sent one. */
      providerError: string | null;
      provider: string | null;
      returnTo: string | null;
    };

const failed = (failure: ConsentFailure, flow: OAuthAuthorizationRow | null, providerError: string | null = null): ConsentOutcome => ({
  ok: false,
  failure,
  providerError,
  provider: flow?.provider ?? null,
  returnTo: flow?.returnTo ?? null,
});

/** An OAuth error code as the provider sent it, kept only when it looks like one (RFC 6749 §4.1.2.1: printable ASCII). */
const errorCode = (value: string | null) => (value && /^[\x20-\x21\x23-\x5b\x5d-\x7e]{1,64}$/.test(value) ? value : 'invalid_response');

/**
 * Ends a consent flow at the platform's callback: `query` is the callback's query string as the
 * provider sent it, `sessionId` the dashboard session the browser came back with (null: none).
 * Never throws for what a browser can send; the outcome says what happened.
 */
export async function completeConsent(deps: OAuthDeps, input: { sessionId: string | null; query: string }): Promise<ConsentOutcome> {
  const params = new URLSearchParams(input.query);
  const state = params.get('state');
  if (!state || state.length > 512) return failed('invalid_state', null);
  // Taken once: whatever happens next, this state cannot be used again.
  const flow = await takeOAuthAuthorization(deps.sql, sha256(state));
  if (!flow) return failed('invalid_state', null);
  if (flow.expiresAt.getTime() <= Date.now()) return failed('expired', flow);
  if (input.sessionId === null || sessionBinding(input.sessionId) !== flow.sessionHash) return failed('session_mismatch', flow);
  if (params.has('error')) {
    const code = errorCode(params.get('error'));
    return failed(code === 'access_denied' ? 'access_denied' : 'provider_error', flow, code);
  }

  const app = await getOAuthApp(deps.sql, flow.appId);
  if (!app) return failed('connection_gone', flow);
  const key = deps.settings.CONNECTIONS_MASTER_KEY;
  const callback = new URL(oauthRedirectUri(deps.settings.PUBLIC_URL));
  callback.search = params.toString();
  let tokens: oidc.TokenEndpointResponse;
  try {
    tokens = await oidc.authorizationCodeGrant(deps.clients.configuration(app), callback, {
      pkceCodeVerifier: openSecret(key, flow.codeVerifierSealed, oauthVerifierContext(flow.stateHash)),
      expectedState: state,
      idTokenExpected: false,
    });
  } catch (error) {
    const failure = providerFailure(error);
    deps.log.warn({ provider: flow.provider, failure: failure.kind, oauthError: failure.error }, 'OAuth code exchange failed');
    return failed(failure.kind === 'unreachable' ? 'provider_unreachable' : 'exchange_failed', flow, failure.error);
  }
  const scopes = grantedScopes(tokens, flow.scopes);
  const expiresAt = expiryOf(tokens);

  if (flow.connectionId) {
    // Re-authorised (reconnect, or more scopes): the same connection, its label and default kept.
    const changed = await deps.sql.begin(async (tx) => {
      const current = await lockOAuthConnection(tx, flow.connectionId!);
      if (!current || current.accountId !== flow.accountId) return null;
      const sealed = sealTokens(key, current.id, { accessToken: tokens.access_token, refreshToken: tokens.refresh_token ?? null });
      const updated = await updateOAuthTokens(tx, current.id, {
        accessTokenSealed: sealed.accessTokenSealed,
        // A provider that sends no new refresh token keeps the old one valid.
        ...(sealed.refreshTokenSealed ? { refreshTokenSealed: sealed.refreshTokenSealed } : {}),
        expiresAt,
        scopes,
        appId: app.id,
      });
      // Seen under the lock: of concurrent callbacks for one connection, only the first finds it waiting.
      return updated && { row: updated, recovered: current.status === 'needs_reauth' };
    });
    if (!changed) return failed('connection_gone', flow);
    const { row } = changed;
    await deps.announce(flow.accountId, flow.provider);
    if (changed.recovered) await deps.transition?.({ type: 'connection.recovered', connection: row });
    return { ok: true, connection: oauthConnectionView(row), created: false, connectRequestId: flow.connectRequestId, returnTo: flow.returnTo };
  }

  const id = randomUUID();
  const row = await insertOAuthConnection(deps.sql, {
    id,
    accountId: flow.accountId,
    provider: flow.provider,
    label: flow.label,
    appId: app.id,
    grantType: 'authorization_code',
    scopes,
    ...sealTokens(key, id, { accessToken: tokens.access_token, refreshToken: tokens.refresh_token ?? null }),
    expiresAt,
    createdByPersonId: flow.personId,
  });
  if (!row) return failed('label_taken', flow);
  await deps.announce(flow.accountId, flow.provider);
  return { ok: true, connection: oauthConnectionView(row), created: true, connectRequestId: flow.connectRequestId, returnTo: flow.returnTo };
}
