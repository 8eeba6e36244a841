/** An Idempotency-Key header: 1 to 200 visible ASCII characters (a UUID works well). */
export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,200}$/;
