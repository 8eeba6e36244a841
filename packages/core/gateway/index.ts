export { classifyAddress, isPrivateAddress, type AddressVerdict } from './addresses.js';
export { ConnectionCache, type SealedConnectionKeys } from './connection-cache.js';
export { connectApi, disconnectApi, listConnections, saveConnection } from './connections.js';
export type { Connection } from './connections.js';
export {
  CONNECTION_HEADER,
  droppedRequestHeaders,
  planMeteredCall,
  upstreamFailure,
  withRenewedBearer,
  type OAuthBearer,
  type OAuthBearerSource,
} from './call-plan.js';
export { MeteredCall, UpstreamSilent, bodyOf, readExcerpt, UPSTREAM_EXCERPT_BYTES } from './metered-call.js';
export type {
  Abortable,
  AnswerSink,
  ChunkedBody,
  ChunkWriter,
  CallObserver,
  CallOutcome,
  MeteredCallDeps,
  MeteredCallRequest,
  MeteredCallResult,
  MeteredCallSettings,
  UpstreamBody,
  UpstreamClient,
  UpstreamDeadline,
  UpstreamRequest,
  UpstreamResponse,
} from './metered-call.js';
export { bodyDecoder, redactResponseHeaders } from './platform-key-guard.js';
export { canonicalPath, methodsServed, operationPriceMicros, priceOf, pricedPath } from './pricing.js';
export {
  PrivateUpstreamError,
  assertPublicHost,
  downstreamResponseHeaders,
  guardedLookup,
  proxyTarget,
  upstreamBase,
  upstreamRequestHeaders,
  upstreamUrl,
  withAuthQuery,
  type UpstreamBase,
} from './upstream.js';
export { MIN_LEAK, SecretRedactor, secretForms } from './redaction.js';
export { doorLocation } from './redirects.js';
