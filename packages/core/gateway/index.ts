export { ConnectionCache, type SealedConnectionKeys } from './connection-cache.js';
export { saveConnection } from './connections.js';
export { droppedRequestHeaders, planMeteredCall, upstreamFailure } from './metered-call.js';
export { bodyDecoder, redactResponseHeaders } from './platform-key-guard.js';
export { priceOf } from './pricing.js';
export { PrivateUpstreamError, assertPublicHost, downstreamResponseHeaders, guardedLookup, isPrivateAddress, proxyTarget, redactSecret, redactingStream, upstreamBase, upstreamRequestHeaders, upstreamUrl, withAuthQuery, type UpstreamBase } from './upstream.js';
