export { connectionKey, saveConnection } from './connections.js';
export { PrivateUpstreamError, assertPublicHost, downstreamResponseHeaders, guardedLookup, isPrivateAddress, proxyTarget, redactSecret, redactingStream, upstreamAuth, upstreamRequestHeaders, upstreamUrl, withAuthQuery } from './upstream.js';
