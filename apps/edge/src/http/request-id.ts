/**
 * A request id the edge keeps when a caller sends it as `X-Request-Id` (else it makes a time-ordered
 * UUID, see buildApp): letters, digits and `._:-`, up to 128. The activity's `requestId` filter takes
 * the same (docs/decisions/request-ids.md).
 */
export const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
