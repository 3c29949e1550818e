// The parts of keygate's OpenAPI document that Fastify's route schemas cannot say: the problem+json
// answers each operation can give (from the ERRORS catalog), the two authentication schemes, and
// the business routes of the live route table, which are not Fastify routes but entries of the
// catch-all proxy. http/plugins/docs.ts puts them together with what @fastify/swagger generates.
import type { OpenAPIV3_1 } from 'openapi-types'
import { BODYLESS_METHODS, HTTP_METHODS, SAFE_METHODS, signedBodyMethodProblem } from '#client/protocol'
import type { AuthTier, RouteConfig } from '../../proxy/route.js'
import { RouteTable } from '../../proxy/route-table.js'
import { ERRORS, problemType, type ErrorCode } from '../../errors.js'
import { BEARER_PROBLEMS } from '../../auth/bearer.js'

/** A code an operation can answer, at its catalog status or (INVALID_SIGNATURE at registration) another. */
export type DocumentedProblem = ErrorCode | readonly [ErrorCode, number]

/** the OpenAPI extension that carries an operation's error codes, machine-readable */
export const ERRORS_EXTENSION = 'x-keygate-errors'
/** the OpenAPI extension that says which business route an operation is, and its auth tier */
export const ROUTE_EXTENSION = 'x-keygate-route'
export const BUSINESS_TAG = 'business routes'

/** What any request can meet, whatever its route. */
export const COMMON_PROBLEMS: readonly DocumentedProblem[] = ['INVALID_TARGET', 'INTERNAL_ERROR', 'SHUTTING_DOWN']

/** What each auth tier of a business route can answer, in pipeline order (auth/pipeline.ts). */
export const TIER_PROBLEMS: Record<AuthTier, readonly DocumentedProblem[]> = {
  signed: ['RATE_LIMITED', ...BEARER_PROBLEMS, 'MISSING_SIGNATURE_HEADERS', 'TIMESTAMP_INVALID', 'TIMESTAMP_OUT_OF_RANGE',
    'UNKNOWN_API_KEY', 'KEY_OWNER_MISMATCH', 'INVALID_SIGNATURE', 'STORE_UNAVAILABLE'],
  // STORE_UNAVAILABLE: Redis away and the token's user not cached (its token cannot be checked against it)
  bearer: [...BEARER_PROBLEMS, 'STORE_UNAVAILABLE'],
  // a signed agent's (auth/agent-signature.ts): its signature, its directory, one use
  agent: ['RATE_LIMITED', 'MISSING_AGENT_SIGNATURE', 'INVALID_AGENT_SIGNATURE', 'AGENT_NOT_ALLOWED', 'AGENT_DIRECTORY_UNAVAILABLE', 'UNKNOWN_AGENT_KEY',
    'INVALID_CONTENT_DIGEST', 'REPLAYED_REQUEST', 'STORE_UNAVAILABLE'],
  public: []
}

/** The generic problem+json answer (RFC 9457), as keygate writes it. */
export const PROBLEM_SCHEMA: OpenAPIV3_1.SchemaObject = {
  type: 'object',
  description: 'RFC 9457 problem details. `code` is stable: program against it. ' +
    'Some codes add members (`errors`, `serverTime`, `maxSkewMs`, `missing`, `apiKey`, `requiredScopes`, `missingScopes`; ' +
      '`policy`, `by`, `limit`, `window` on a rate limit).',
  required: ['type', 'title', 'status', 'detail', 'code'],
  properties: {
    type: { type: 'string', description: '`urn:keygate:problem:` and the code in lower case with dashes' },
    title: { type: 'string' },
    status: { type: 'integer' },
    detail: { type: 'string', description: 'what went wrong with this request and how to fix it' },
    code: { type: 'string', enum: Object.keys(ERRORS) },
    errors: {
      type: 'array',
      description: 'VALIDATION_FAILED: one entry per field',
      items: { type: 'object', properties: { field: { type: 'string' }, message: { type: 'string' } } }
    },
    serverTime: { type: 'integer', description: 'timestamp errors: the server time in ms since the Unix epoch' },
    maxSkewMs: { type: 'integer', description: 'timestamp errors: the largest accepted distance from server time, in ms' }
  },
  additionalProperties: true
}

export const SECURITY_SCHEMES: Record<string, OpenAPIV3_1.SecuritySchemeObject> = {
  bearerAuth: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'A token from `POST /v1/auth/token`, sent as `Authorization: Bearer <token>`. ' +
      'EdDSA (or ES256) JWT; the public keys are at `/.well-known/jwks.json`. Or, where the operator trusts an identity provider, ' +
      'an access token that IdP issued (a JWT for keygate\'s audience, signed with a key the IdP publishes): its user is ' +
      '`<issuer name>:<subject>` (docs/identity-providers.md). 503 IDP_KEYS_UNAVAILABLE: keygate has no usable key of that IdP to check it with, ' +
      'or the IdP is down and the token names a key keygate does not hold.'
  },
  apiKey: {
    type: 'apiKey',
    in: 'header',
    name: 'X-API-Key',
    description: 'The `apiKey` that `POST /v1/api-keys` returned for your registered public key. Sent together with X-API-Timestamp and X-API-Signature ' +
      '(an RFC 9421 request names it as `keyid` in Signature-Input instead).'
  },
  apiTimestamp: {
    type: 'apiKey',
    in: 'header',
    name: 'X-API-Timestamp',
    description: 'The current time in milliseconds since the Unix epoch, as a decimal string; at most 15 minutes from server time.'
  },
  apiSignature: {
    type: 'apiKey',
    in: 'header',
    name: 'X-API-Signature',
    description: 'Single-line base64 of the signature made with the private key of X-API-Key (RSA: PKCS#1 v1.5 SHA-256; Ed25519; P-256: ECDSA SHA-256, DER) ' +
      'over the signing string: ' +
      'the X-API-Timestamp value, the upper-case method, the request target exactly as sent (path, plus `?` and the query string when there is one) ' +
      'and the exact body bytes (empty for a GET), concatenated with no separator and no trailing newline.'
  },
  agentSignatureInput: {
    type: 'apiKey',
    in: 'header',
    name: 'Signature-Input',
    description: 'A signed agent (Web Bot Auth, docs/agents.md): an RFC 9421 signature tagged `tag="web-bot-auth"`, its keyid the JWK thumbprint ' +
      '(RFC 7638) of a key its directory publishes, with created and expires (at most an hour apart), covering @authority (or @target-uri), ' +
      'signature-agent, and content-digest when there is a body. Each signature is good for one request.'
  },
  agentSignature: {
    type: 'apiKey',
    in: 'header',
    name: 'Signature',
    description: 'The agent\'s signature bytes, as RFC 9421 Signature: label=:base64:'
  },
  signatureAgent: {
    type: 'apiKey',
    in: 'header',
    name: 'Signature-Agent',
    description: 'Where the agent\'s keys are: `label="https://agent.example"` (its origin, whose directory is at ' +
      '/.well-known/http-message-signatures-directory), `label="https://...";type=jwks_uri` (a JWK Set), or the earlier single quoted origin. HTTPS only.'
  }
}

export const SECURITY_BY_TIER: Record<AuthTier, Array<Record<string, string[]>>> = {
  signed: [{ bearerAuth: [], apiKey: [], apiTimestamp: [], apiSignature: [] }],
  bearer: [{ bearerAuth: [] }],
  agent: [{ agentSignature: [], agentSignatureInput: [], signatureAgent: [] }],
  public: []
}

export const DOCUMENT_DESCRIPTION = [
  'keygate is an API gateway that owns request-signing authentication for the services behind it.',
  '',
  '**Two tiers.** Every call needs a bearer token from `POST /v1/auth/token`, except the public ones. ' +
    'Business routes marked *signed* also need three headers: `X-API-Key` (your registered key), `X-API-Timestamp` ' +
    '(milliseconds since the Unix epoch) and `X-API-Signature`.',
  '',
  '**The signing string** is the concatenation, with no separators, of the timestamp exactly as sent, the upper-case ' +
    'method, the request target as sent on the request line (path, plus `?query` when there is one, undecoded) and the ' +
    'exact body bytes (nothing for a GET). Sign it with the key\'s algorithm (RSA: PKCS#1 v1.5 and SHA-256, what `openssl dgst -sha256 -sign` ' +
    'makes; Ed25519; P-256: ECDSA SHA-256 in DER) and send the signature as single-line base64. A signed POST, PUT, PATCH or DELETE is accepted once.',
  '',
  '**RFC 9421.** Instead of the three X-API-* headers, a signed request may carry RFC 9421 HTTP Message Signatures (`Signature-Input` and ' +
    '`Signature`, `keyid` the apiKey, `created` in seconds) covering `@method`, `@target-uri` (or `@path` and `@query`) and, with a body, ' +
    '`content-digest` (RFC 9530, `sha-256` or `sha-512`). The rules, and the clients that sign them: ' +
    'docs/signing.md#rfc-9421-http-message-signatures in the keygate package.',
  '',
  '**Errors** are RFC 9457 `application/problem+json` with a stable `code`; each operation lists the codes it can answer. ' +
    'Malformed HTTP (`MALFORMED_HTTP`), slow requests (`REQUEST_TIMEOUT`) and oversized headers (`HEADERS_TOO_LARGE`) are ' +
    'answered on the connection before any route.',
  '',
  `Business routes (tag *${BUSINESS_TAG}*) come from the gateway's route table: a prefix route takes its path and every ` +
    'path under it. Their success answers are the upstream service\'s own.'
].join('\n')

interface ProblemExample {
  summary: string
  value: Record<string, unknown>
}

export interface ResponseObject {
  description: string
  content?: Record<string, { schema: Record<string, unknown>; examples?: Record<string, ProblemExample> }>
}

function codeAndStatus (problem: DocumentedProblem): [ErrorCode, number] {
  return typeof problem === 'string' ? [problem, ERRORS[problem].status] : [problem[0], problem[1]]
}

/** The codes of a list, once each, with their status. */
export function problemCodes (problems: readonly DocumentedProblem[]): Array<[ErrorCode, number]> {
  const seen = new Set<string>()
  const out: Array<[ErrorCode, number]> = []
  for (const problem of problems) {
    const [code, status] = codeAndStatus(problem)
    if (seen.has(`${code} ${status}`)) continue
    seen.add(`${code} ${status}`)
    out.push([code, status])
  }
  return out
}

/** OpenAPI responses for a list of codes: one per status, each code an example. */
export function problemResponses (problems: readonly DocumentedProblem[]): Record<string, ResponseObject> {
  const byStatus = new Map<number, Array<ErrorCode>>()
  for (const [code, status] of problemCodes(problems)) byStatus.set(status, [...byStatus.get(status) ?? [], code])
  const responses: Record<string, ResponseObject> = {}
  for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    responses[String(status)] = {
      description: codes.map((code) => `\`${code}\`: ${ERRORS[code].title}`).join('; '),
      content: {
        'application/problem+json': {
          schema: { $ref: '#/components/schemas/Problem' },
          examples: Object.fromEntries(codes.map((code) => [code, {
            summary: ERRORS[code].title,
            value: { type: problemType(code), title: ERRORS[code].title, status, detail: '(what went wrong with this request)', code }
          }]))
        }
      }
    }
  }
  return responses
}

/** Whether a request of this method may carry a body on this route (else 400 VALIDATION_FAILED). */
function takesBody (route: RouteConfig, method: string): boolean {
  return route.auth === 'signed' ? signedBodyMethodProblem(method, route.bodyOnMethods) === undefined : !BODYLESS_METHODS.has(method)
}

/** The codes a business route can answer for one method. */
export function routeProblems (route: RouteConfig, method: string, guardsAgainstAliases = false): DocumentedProblem[] {
  // each once: a route's limits and its scopes may both answer STORE_UNAVAILABLE
  return [...new Set<DocumentedProblem>([
    ...COMMON_PROBLEMS,
    // a stronger route on the same upstream: its paths spelled otherwise are refused here
    ...(guardsAgainstAliases ? ['PATH_ALIAS' as const] : []),
    ...(takesBody(route, method) ? ['PAYLOAD_TOO_LARGE' as const, 'BODY_MEMORY_EXHAUSTED' as const] : ['VALIDATION_FAILED' as const]),
    ...TIER_PROBLEMS[route.auth],
    // a seed-signed body that starts with a byte a target may hold (auth/seed-body.ts)
    ...(takesBody(route, method) && route.auth === 'signed' && route.signature !== 'rfc9421' && route.seedBodyBoundary === 'enforced'
      ? ['AMBIGUOUS_SIGNED_BODY' as const]
      : []),
    ...(route.auth === 'signed' && route.replay === 'reject' && !SAFE_METHODS.has(method) ? ['REPLAYED_REQUEST' as const] : []),
    // RFC 9421 requests: a Content-Digest that is not the body's (a bodiless request may carry one too)
    ...(route.auth === 'signed' && route.signature !== 'seed' ? ['INVALID_CONTENT_DIGEST' as const] : []),
    // a route's rate limits (the signed tier already answers both: its signature budget, its key store)
    ...(route.rateLimits.length > 0 && route.auth !== 'signed' ? ['RATE_LIMITED' as const] : []),
    ...(route.rateLimits.length > 0 && route.onStoreDown === 'deny' && route.auth !== 'signed' ? ['STORE_UNAVAILABLE' as const] : []),
    // the user's scopes are read from the store when they are not cached
    ...(route.scopes.length > 0 ? ['INSUFFICIENT_SCOPE' as const, 'STORE_UNAVAILABLE' as const] : []),
    // an MCP route: a session another identity opened, or none (mcp/sessions.ts); its owner is read from the store
    ...(route.mcp !== undefined ? ['MCP_SESSION_NOT_FOUND' as const, 'STORE_UNAVAILABLE' as const, 'MCP_LIST_UNFILTERABLE' as const] : []),
    'UPSTREAM_UNAVAILABLE',
    'UPSTREAM_BUSY',
    'UPSTREAM_TIMEOUT'
  ])]
}

export interface OperationObject {
  summary?: string
  description?: string
  tags?: string[]
  security?: Array<Record<string, string[]>>
  responses: Record<string, ResponseObject>
  [extension: `x-${string}`]: unknown
}

/**
 * The business routes as OpenAPI paths: a route's prefix (or exact path) with its methods and
 * auth tier. Where an exact path and a prefix share a path and a method, the exact route is the
 * one that answers, and the one documented.
 */
export function businessPaths (routes: readonly RouteConfig[]): Record<string, Record<string, OperationObject>> {
  const paths: Record<string, Record<string, OperationObject>> = {}
  const table = new RouteTable(routes)
  const ordered = [...routes].sort((a, b) => Number(b.exact) - Number(a.exact))
  for (const route of ordered) {
    const item = paths[route.prefix] ??= {}
    for (const method of HTTP_METHODS) {
      if (!route.methods.includes(method)) continue
      const key = method.toLowerCase()
      if (item[key] !== undefined) continue
      const scope = route.exact ? 'this exact path' : 'this path and every path under it'
      item[key] = {
        summary: `${method} ${route.prefix} (${route.auth})`,
        description: `Business route \`${route.name}\`: ${scope}, forwarded to its upstream service once authenticated (${describeTier(route.auth)}). ` +
          requiresScopes(route.scopes) +
          'The success answer is the upstream\'s own.',
        tags: [BUSINESS_TAG],
        security: SECURITY_BY_TIER[route.auth],
        responses: {
          default: { description: 'The upstream service\'s answer, passed through unchanged' },
          ...problemResponses(routeProblems(route, method, table.guardsAgainstAliases(route)))
        },
        [ROUTE_EXTENSION]: {
          name: route.name, match: route.exact ? 'exact' : 'prefix', auth: route.auth, ...(route.scopes.length > 0 && { scopes: route.scopes })
        },
        [ERRORS_EXTENSION]: [...new Set(problemCodes(routeProblems(route, method, table.guardsAgainstAliases(route))).map(([code]) => code))]
      }
    }
  }
  return paths
}

/** "Requires the scope `a` ..." for a route that requires some, else nothing. */
function requiresScopes (scopes: readonly string[]): string {
  if (scopes.length === 0) return ''
  return `Requires the scope${scopes.length === 1 ? '' : 's'} ${scopes.map((scope) => `\`${scope}\``).join(', ')} (403 INSUFFICIENT_SCOPE without). `
}

function describeTier (tier: AuthTier): string {
  switch (tier) {
    case 'signed': return 'bearer token and API key signature'
    case 'bearer': return 'bearer token'
    case 'agent': return 'a signed agent\'s Web Bot Auth signature'
    case 'public': return 'no credentials'
  }
}
