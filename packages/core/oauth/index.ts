export { OAuthClients, isLoopbackHost, providerFailure, type OAuthSettings, type ProviderFailure } from './client.js';
export {
  assertEndpoint,
  assertScopes,
  listOAuthAppViews,
  normalizeProvider,
  oauthAppView,
  registerOAuthApp,
  removeOAuthApp,
  type OAuthAppRegistration,
  type OAuthAppView,
} from './apps.js';
export {
  oauthAccessTokenContext,
  oauthClientSecretContext,
  oauthProviderSecretContext,
  oauthRefreshTokenContext,
  oauthVerifierContext,
  openAccessToken,
  openRefreshToken,
  sealTokens,
} from './secrets.js';
export { OAuthConnectionCache } from './connection-cache.js';
export {
  assertLabel,
  connectClientCredentials,
  disconnectOAuth,
  LABEL_PATTERN,
  listOAuthConnectionViews,
  makeDefaultConnection,
  oauthConnectionView,
  renameConnection,
  type OAuthConnectionView,
  type RevocationOutcome,
} from './connections.js';
export {
  completeConsent,
  FLOW_TTL_MS,
  safeReturnTo,
  startConsent,
  type ConsentFailure,
  type ConsentOutcome,
  type StartConsentInput,
} from './consent.js';
export { OAUTH_CALLBACK_PATH, oauthRedirectUri, type ConnectionTransition, type OAuthDeps } from './deps.js';
export { connectionNotifier, reconnectLink, transitionData, transitionEventId } from './notify.js';
export {
  EXPIRY_MARGIN_MS,
  isExpiring,
  isTransientFailure,
  renewConnection,
  retryDelayMs,
  RETRY_BASE_MS,
  RETRY_MAX_MS,
  type RenewalCause,
  type RenewalOutcome,
  type RenewOptions,
} from './renewal.js';
export { MIN_TOKEN_AGE_FOR_401_MS, OAuthTokenSource, needsReauth, pickConnection } from './tokens.js';
export { oauthRenewalJob, oauthRenewalSettings, renewDueConnections, type OAuthRenewalSettings, type RenewalTally } from './renewal-job.js';
