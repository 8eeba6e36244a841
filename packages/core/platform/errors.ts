/**
 * Typed errors shared by the data layer and the edge. Domain code throws a PlatformError with a
 * stable `code`; the edge's single error handler turns it into `{ ok: false, error, code, hint? }`
 * with the status from ERROR_STATUS. Agents act on `code`, people read `error` and `hint`.
 */
export const ERROR_STATUS = {
  validation_failed: 400,
  invalid_json: 400,
  body_missing: 400,
  missing_credentials: 401,
  invalid_key: 401,
  invalid_token: 401,
  invalid_session: 401,
  invalid_credentials: 401,
  insufficient_balance: 402,
  payment_invalid: 402,
  forbidden: 403,
  key_disabled: 403,
  key_revoked: 403,
  key_expired: 403,
  agent_key_forbidden: 403,
  approver_forbidden: 403,
  step_assigned_elsewhere: 403,
  csrf_failed: 403,
  spend_limit_exceeded: 403,
  api_not_allowed: 403,
  live_billing: 403,
  private_upstream: 403,
  email_unverified: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  max_cost_exceeded: 409,
  balance_cap_exceeded: 409,
  idempotency_conflict: 409,
  connection_required: 409,
  connection_needs_reauth: 409,
  oauth_not_configured: 409,
  api_not_callable: 409,
  email_taken: 409,
  balance_remaining: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal_error: 500,
  upstream_error: 502,
  oauth_failed: 502,
  upstream_unavailable: 503,
  service_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class PlatformError extends Error {
  override name = 'PlatformError';
  readonly code: ErrorCode;
  readonly hint: string | undefined;
  /** Extra fields merged into the error body, e.g. `balance` and `cost` on 402. */
  readonly details: Record<string, unknown> | undefined;
  /** Extra response headers, e.g. `Retry-After` (the metered call adds those of a refund). */
  headers: Record<string, string> | undefined;
  /**
   * The same refusal in a tool caller's words (MCP), where the REST wording names a header or a route
   * no tool takes: the tool's arguments and other tools instead. Absent: the MCP door translates the
   * REST wording's route references itself (apps/edge/src/mcp/wording.ts).
   */
  readonly tool: { error?: string; hint?: string } | undefined;

  constructor(
    code: ErrorCode,
    message: string,
    options: {
      hint?: string;
      details?: Record<string, unknown>;
      headers?: Record<string, string>;
      cause?: unknown;
      tool?: { error?: string; hint?: string };
    } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.hint = options.hint;
    this.details = options.details;
    this.headers = options.headers;
    this.tool = options.tool;
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const notFound = (what: string, hint?: string) => new PlatformError('not_found', `${what} not found`, hint === undefined ? {} : { hint });
