export { saveConnection } from './connections.js';
export { planMeteredCall, upstreamFailure } from './metered-call.js';
export { bodyDecoder, redactResponseHeaders } from './platform-key-guard.js';
export { priceOf } from './pricing.js';
export { PrivateUpstreamError, assertPublicHost, downstreamResponseHeaders, guardedLookup, isPrivateAddress, proxyTarget, redactSecret, redactingStream, upstreamRequestHeaders, upstreamUrl, withAuthQuery } from './upstream.js';
