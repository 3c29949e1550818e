// The error catalog: every error a client can meet, with its stable code, HTTP status and title.
// Codes are part of the interface clients code against; docs/errors.md documents each one and a test checks
// that it does. Handlers throw `GatewayError`s; the error handler renders them as problem+json.

export const ERRORS = {
  VALIDATION_FAILED: { status: 400, title: 'The request is malformed' },
  INVALID_TARGET: { status: 400, title: 'The request target is not a canonical origin-form target keygate accepts' },
  PATH_ALIAS: { status: 400, title: 'The path is another spelling of a path a stronger route guards' },
  MALFORMED_HTTP: { status: 400, title: 'The request is not well-formed HTTP/1.1' },
  AMBIGUOUS_SIGNED_BODY: { status: 400, title: 'The body could be read as the end of the signed target: one seed signature would authorize other requests' },
  UNSEEN_BODY: { status: 400, title: 'The request has a body keygate is not shown: it cannot vouch for it' },
  // MCP routes (mcp-calls/messages.ts): the body read once, strictly; answered as JSON-RPC errors
  MCP_PARSE_ERROR: { status: 400, title: 'The MCP body is not one strict JSON value (duplicate keys, bad UTF-8, a byte order mark, bad JSON)' },
  MCP_INVALID_MESSAGE: { status: 400, title: 'The MCP body is not a JSON-RPC message keygate can judge' },
  MCP_BATCH_NOT_ALLOWED: { status: 400, title: 'A JSON-RPC batch, which the request\'s MCP protocol version does not allow' },
  INVALID_DECISION_REQUEST: { status: 400, title: 'The proxy\'s decision request does not say exactly which request to judge' },
  // the portal's login through an IdP (idp/portal-login.ts)
  LOGIN_STATE_INVALID: { status: 400, title: 'The login is unknown, already used or expired, or was begun in another browser' },
  INVALID_PUBLIC_KEY: { status: 400, title: 'The public key is not one keygate accepts (RSA, Ed25519 or EC P-256)' },
  INVALID_CREDENTIALS: { status: 401, title: 'Wrong username or password' },
  IDP_LOGIN_FAILED: { status: 401, title: 'The login through the identity provider did not succeed' },
  MISSING_TOKEN: { status: 401, title: 'A bearer token is required' },
  INVALID_TOKEN: { status: 401, title: 'The bearer token is not valid' },
  DPOP_REQUIRED: { status: 401, title: 'The token is DPoP-bound, or the route requires DPoP: send it with the DPoP scheme and a proof' },
  INVALID_DPOP_PROOF: { status: 401, title: 'The DPoP proof is missing, malformed, for another request or key, used before, or does not verify' },
  USE_DPOP_NONCE: { status: 401, title: 'The DPoP proof lacks the server\'s current nonce (DPoP-Nonce)' },
  MISSING_SIGNATURE_HEADERS: { status: 401, title: 'API key signature headers are missing' },
  UNKNOWN_API_KEY: { status: 401, title: 'The API key is not registered' },
  // one title per code, whichever scheme signed (RFC 9457): each names both schemes' fields; the detail names the one sent
  TIMESTAMP_INVALID: { status: 401, title: 'The signature\'s time is missing or in the wrong unit (X-API-Timestamp: milliseconds; RFC 9421 created: seconds)' },
  TIMESTAMP_OUT_OF_RANGE: { status: 401, title: 'The signature\'s time is too far from server time, or expired (X-API-Timestamp; RFC 9421 created, expires)' },
  INVALID_SIGNATURE: { status: 401, title: 'The signature does not verify' },
  INVALID_CONTENT_DIGEST: { status: 401, title: 'Content-Digest does not match the body' },
  REPLAYED_REQUEST: { status: 401, title: 'This signed request was already accepted' },
  // a remote key set's (remote-keys/): an IdP's JWKS now, an agent's key directory later (each may pass its own error factory)
  UNKNOWN_SIGNING_KEY: { status: 401, title: 'The credential names a signing key that its issuer\'s key set does not hold' },
  // signed agents (Web Bot Auth: agents/, auth/agent-signature.ts)
  MISSING_AGENT_SIGNATURE: { status: 401, title: 'The route takes signed agents: a Web Bot Auth signature (tag="web-bot-auth") is required' },
  INVALID_AGENT_SIGNATURE: { status: 401, title: 'The agent\'s signature is malformed, out of its time or does not verify' },
  UNKNOWN_AGENT_KEY: { status: 401, title: 'The agent\'s key directory does not publish the key its signature names' },
  AGENT_DIRECTORY_UNAVAILABLE: { status: 401, title: 'The agent\'s key directory cannot be fetched, or is refused' },
  KEY_OWNER_MISMATCH: { status: 403, title: 'The API key belongs to another user' },
  AGENT_NOT_ALLOWED: { status: 403, title: 'The route does not let this agent in' },
  MCP_CALL_DENIED: { status: 403, title: 'The route lets no one call this MCP tool, resource, prompt or method' },
  ORIGIN_NOT_ALLOWED: { status: 403, title: 'The request\'s Origin is not one the route allows' },
  KEY_LIMIT_REACHED: { status: 403, title: 'The user has as many active API keys as allowed' },
  UNTRUSTED_PROXY: { status: 403, title: 'The decision listener takes decision requests from the proxies it trusts only' },
  INSUFFICIENT_SCOPE: { status: 403, title: 'The credentials lack a scope this route requires' },
  NOT_FOUND: { status: 404, title: 'No such route' },
  API_KEY_NOT_FOUND: { status: 404, title: 'No such API key' },
  USER_NOT_FOUND: { status: 404, title: 'No such user' },
  MCP_SESSION_NOT_FOUND: { status: 404, title: 'MCP session not found for this identity' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'The route does not take this method' },
  REQUEST_TIMEOUT: { status: 408, title: 'The request did not arrive in time' },
  DUPLICATE_KEY: { status: 409, title: 'This public key is already registered' },
  KEY_NOT_ACTIVE: { status: 409, title: 'The API key is revoked or expired: it cannot be changed' },
  NO_ROUTE_FILE: { status: 409, title: 'The gateway runs without a route file' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'The request body is too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'The content type is not accepted here' },
  ROUTE_FILE_INVALID: { status: 422, title: 'The route file has mistakes; the routes in force stay' },
  CONFIG_FILE_INVALID: { status: 422, title: 'A reloaded file has mistakes; every file in force stays' },
  RATE_LIMITED: { status: 429, title: 'Too many requests' },
  HEADERS_TOO_LARGE: { status: 431, title: 'The request headers are too large' },
  INTERNAL_ERROR: { status: 500, title: 'Internal error' },
  UPSTREAM_UNAVAILABLE: { status: 502, title: 'The upstream service could not be reached' },
  // MCP routes (mcp/list-filter.ts): a list answer keygate cannot read to filter is not passed
  MCP_LIST_UNFILTERABLE: { status: 502, title: 'The upstream\'s answer to an MCP list request could not be filtered to what the caller may use' },
  STORE_UNAVAILABLE: { status: 503, title: 'The key and user store cannot be reached' },
  IDP_KEYS_UNAVAILABLE: { status: 503, title: 'The issuer\'s signing keys cannot be fetched, and those kept are too old to trust' },
  SHUTTING_DOWN: { status: 503, title: 'The gateway is shutting down' },
  UPSTREAM_BUSY: { status: 503, title: 'The upstream service is busy' },
  BODY_MEMORY_EXHAUSTED: { status: 503, title: 'The gateway holds as many request bodies as it may at once' },
  UPSTREAM_TIMEOUT: { status: 504, title: 'The upstream service did not answer in time' }
} as const satisfies Record<string, { status: number; title: string }>

export type ErrorCode = keyof typeof ERRORS

export const PROBLEM_CONTENT_TYPE = 'application/problem+json'

export function problemType (code: string): string {
  return `urn:keygate:problem:${code.toLowerCase().replaceAll('_', '-')}`
}

export interface FieldError {
  field: string
  message: string
}

export interface ProblemBody {
  type: string
  title: string
  status: number
  detail: string
  code: string
  [member: string]: unknown
}

export interface GatewayErrorOptions {
  /** extra problem members, e.g. `errors`, `serverTime`, `maxSkewMs` */
  extra?: Record<string, unknown>
  /** response headers, e.g. `Retry-After`, `WWW-Authenticate` */
  headers?: Record<string, string>
  cause?: unknown
  /** where one code has two statuses (INVALID_SIGNATURE: 400 at registration, 401 on requests) */
  status?: number
}

export class GatewayError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  readonly extra: Record<string, unknown> | undefined
  readonly headers: Record<string, string> | undefined

  constructor (code: ErrorCode, detail: string, options: GatewayErrorOptions = {}) {
    const status = options.status ?? ERRORS[code].status
    // A refusal (4xx) is the client's doing: its stack trace says nothing, and capturing one cost
    // ~10 us of every refused request (measured under a flood of them). 5xx keep theirs.
    const stackTraceLimit = Error.stackTraceLimit
    if (status < 500) Error.stackTraceLimit = 0
    try {
      super(detail, options.cause === undefined ? undefined : { cause: options.cause })
    } finally {
      Error.stackTraceLimit = stackTraceLimit
    }
    this.name = 'GatewayError'
    this.code = code
    this.statusCode = status
    this.extra = options.extra
    this.headers = options.headers
  }

  toProblem (): ProblemBody {
    const { title } = ERRORS[this.code]
    return { type: problemType(this.code), title, status: this.statusCode, detail: this.message, code: this.code, ...this.extra }
  }
}

export function isGatewayError (err: unknown): err is GatewayError {
  return err instanceof GatewayError
}
