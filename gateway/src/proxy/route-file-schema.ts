// The route file's schema (KEYGATE_ROUTES): every field a route entry may have and what each
// takes, and the schema's errors said in words, each naming the route and the field
// (route-file.ts reads the file; route-rules.ts checks what a schema cannot say).
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { Value, ValueErrorType, type ValueError } from '@sinclair/typebox/value'
import { BODY_OPTIONAL_METHODS, HTTP_METHODS } from '#client/protocol'
import { SEED_BODY_BOUNDARIES, SIGNATURE_SCHEME_POLICIES, UNSEEN_BODY_POLICIES } from '../auth/stage.js'
import { ISSUER_NAME, ISSUER_NAME_RULE, MAX_BODY_LIMIT } from '../config/env.js'
import { BUCKET_PATTERN, MAX_LIMIT, RATE_LIMIT_BY, STORE_DOWN_POLICIES, WINDOW_PATTERN } from '../limits/rate-limit.js'
import { MAX_SCOPES, SCOPE_PATTERN, SCOPE_RULE } from '../users/scopes.js'
import { PATH_NORMALISATIONS } from './backend-paths.js'
import { MAX_MCP_SESSION_TTL_SECONDS, MAX_MCP_STREAM_IDLE_SECONDS } from '../mcp-calls/policy.js'
import { AUTH_TIERS, DPOP_POLICIES } from './route.js'

const HEADER_NAME = "^[A-Za-z0-9!#$%&'*+.^_`|~-]+$"
const HeaderName = Type.String({ pattern: HEADER_NAME, maxLength: 100, description: 'an HTTP header name' })
/** CGI-style servers read x_user and x-user as one header: an identity header's client copy could pass as it. */
const IdentityHeaderName = Type.String({
  pattern: HEADER_NAME.replace('_', ''),
  maxLength: 100,
  description: 'an HTTP header name without "_" (CGI-style servers read x_user and x-user as one header; use "-")'
})
const HeaderValue = Type.String({ pattern: '^[\\x20-\\x7E\\t]*$', maxLength: 4096, description: 'printable ASCII' })
const Scope = Type.String({ pattern: SCOPE_PATTERN, description: `a scope: ${SCOPE_RULE}` })
const Path = Type.String({ pattern: '^/[A-Za-z0-9\\-._~!$&\'()*+,;=:@/%]*$', maxLength: 2048, description: 'a path starting with /' })

const RateLimitEntrySchema = Type.Object({
  by: Type.Union(RATE_LIMIT_BY.map((by) => Type.Literal(by))),
  limit: Type.Integer({ minimum: 1, maximum: MAX_LIMIT }),
  window: Type.String({ pattern: WINDOW_PATTERN, description: 'a whole number and s, m, h or d (1s, 10s, 1m, 1h, 1d, 30d)' }),
  bucket: Type.Optional(Type.String({ pattern: BUCKET_PATTERN, description: 'a bucket name: lower-case letters, digits, "-" and "_", at most 63' }))
}, { additionalProperties: false })

/** scopes a call asks for beyond the route's ([]: none more), or deny */
const McpRequirement = Type.Union([Type.Array(Scope, { uniqueItems: true, maxItems: MAX_SCOPES }), Type.Literal('deny')],
  { description: 'a list of scopes, or deny' })
const McpNames = Type.Record(Type.String({ minLength: 1, maxLength: 1024 }), McpRequirement)
/** An MCP route (docs/mcp.md): its policy per tool, resource, prompt and method, and the origins it allows. */
const McpSchema = Type.Object({
  tools: Type.Optional(McpNames),
  resources: Type.Optional(McpNames),
  prompts: Type.Optional(McpNames),
  methods: Type.Optional(McpNames),
  default: Type.Optional(McpRequirement),
  origins: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 300, description: 'an origin: https://host[:port]' }),
    { uniqueItems: true, maxItems: 100 })),
  // sessions are bound to the identity that opened them (mcp/sessions.ts)
  sessions: Type.Optional(Type.Object({
    ttlSeconds: Type.Optional(Type.Integer({ minimum: 60, maximum: MAX_MCP_SESSION_TTL_SECONDS }))
  }, { additionalProperties: false })),
  // a tool's own rate limits and quotas, by name or glob as `tools` (mcp-calls/tool-limits.ts)
  toolRateLimits: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: 1024 }), Type.Array(RateLimitEntrySchema, { minItems: 1, maxItems: 16 }))),
  // event streams: how long one may be silent before keygate cuts it (in place of timeoutMs)
  streams: Type.Optional(Type.Object({
    idleSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_MCP_STREAM_IDLE_SECONDS }))
  }, { additionalProperties: false }))
}, { additionalProperties: false })

export const RouteEntrySchema = Type.Object({
  name: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  prefix: Type.Optional(Path),
  path: Type.Optional(Path),
  upstream: Type.String({ minLength: 1 }),
  auth: Type.Union(AUTH_TIERS.map((tier) => Type.Literal(tier))),
  methods: Type.Optional(Type.Array(Type.Union(HTTP_METHODS.map((m) => Type.Literal(m))), { minItems: 1, uniqueItems: true })),
  rewrite: Type.Optional(Path),
  timeoutMs: Type.Optional(Type.Integer({ minimum: 1, maximum: 3_600_000 })),
  bodyLimit: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_BODY_LIMIT })),
  identityHeaders: Type.Optional(Type.Object({
    user: Type.Optional(IdentityHeaderName),
    key: Type.Optional(IdentityHeaderName),
    keyName: Type.Optional(IdentityHeaderName),
    scopes: Type.Optional(IdentityHeaderName),
    agent: Type.Optional(IdentityHeaderName),
    agentKey: Type.Optional(IdentityHeaderName),
    dpopKey: Type.Optional(IdentityHeaderName)
  }, { additionalProperties: false })),
  agents: Type.Optional(Type.Union([
    Type.Literal('any'),
    Type.Array(Type.String({ minLength: 9, maxLength: 300, description: 'a signed agent\'s directory origin: https://host[:port]' }),
      { minItems: 1, maxItems: 1000, uniqueItems: true })
  ], { description: 'the signed agents (Web Bot Auth) the route lets in: any, or a list of their directory origins' })),
  addHeaders: Type.Optional(Type.Record(Type.String({ pattern: HEADER_NAME }), HeaderValue)),
  removeHeaders: Type.Optional(Type.Array(HeaderName)),
  replay: Type.Optional(Type.Union([Type.Literal('reject'), Type.Literal('allow')])),
  signature: Type.Optional(Type.Union(SIGNATURE_SCHEME_POLICIES.map((policy) => Type.Literal(policy)))),
  signatureLabel: Type.Optional(Type.String({
    pattern: '^[a-z*][a-z0-9_\\-.*]{0,62}$',
    description: 'a signature label: a Structured Fields key (lower-case letters, digits, _ - . *), at most 63'
  })),
  seedBodyBoundary: Type.Optional(Type.Union(SEED_BODY_BOUNDARIES.map((value) => Type.Literal(value)))),
  unseenBody: Type.Optional(Type.Union(UNSEEN_BODY_POLICIES.map((value) => Type.Literal(value)))),
  bodyOnMethods: Type.Optional(Type.Array(Type.Union(BODY_OPTIONAL_METHODS.map((m) => Type.Literal(m))), { minItems: 1, uniqueItems: true })),
  identityToken: Type.Optional(Type.Object({
    header: Type.Optional(IdentityHeaderName),
    ttlSeconds: Type.Optional(Type.Integer({ minimum: 10, maximum: 3600 })),
    audience: Type.Optional(Type.String({ minLength: 1, maxLength: 1000 }))
  }, { additionalProperties: false })),
  allowMatrixParams: Type.Optional(Type.Boolean()),
  keepHeaders: Type.Optional(Type.Array(HeaderName, { uniqueItems: true })),
  rateLimits: Type.Optional(Type.Array(RateLimitEntrySchema, { minItems: 1 })),
  onStoreDown: Type.Optional(Type.Union(STORE_DOWN_POLICIES.map((policy) => Type.Literal(policy)))),
  scopes: Type.Optional(Type.Array(Scope, { uniqueItems: true, maxItems: MAX_SCOPES })),
  backendNormalises: Type.Optional(Type.Array(Type.Union(PATH_NORMALISATIONS.map((n) => Type.Literal(n))), { uniqueItems: true })),
  resource: Type.Optional(Type.String({ minLength: 1, maxLength: 2048, description: 'the id of one of the file\'s resources' })),
  dpop: Type.Optional(Type.Union(DPOP_POLICIES.map((policy) => Type.Literal(policy)),
    { description: 'required: every token must be DPoP-bound and sent with a proof (RFC 9449); allowed (default): bound tokens need theirs' })),
  mcp: Type.Optional(McpSchema)
}, { additionalProperties: false })
export type RouteEntry = Static<typeof RouteEntrySchema>

/** A protected resource (RFC 9728): routes that name its id belong to it (docs/resource-server.md). */
export const ResourceEntrySchema = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 2048, description: 'an absolute https URL: the resource identifier clients know the API by' }),
  name: Type.String({ minLength: 1, maxLength: 200 }),
  documentation: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
  issuers: Type.Array(Type.String({ pattern: `^${ISSUER_NAME}$`, description: `an issuer's name: ${ISSUER_NAME_RULE}` }),
    { minItems: 1, maxItems: 32, uniqueItems: true }),
  audiences: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { maxItems: 16, uniqueItems: true })),
  // required: every token on the resource's routes must be DPoP-bound (its metadata says so)
  dpop: Type.Optional(Type.Union(DPOP_POLICIES.map((policy) => Type.Literal(policy)))),
  // the IdP's scope (or role) -> keygate's, for tokens used on this resource: in place of the issuer's map
  scopes: Type.Optional(Type.Object({
    map: Type.Record(Type.String({ minLength: 1, maxLength: 256 }), Type.Union([
      Scope,
      Type.Array(Scope, { maxItems: 64 })
    ]))
  }, { additionalProperties: false }))
}, { additionalProperties: false })
export type ResourceEntry = Static<typeof ResourceEntrySchema>

export const RouteFileSchema = Type.Object({
  resources: Type.Optional(Type.Array(ResourceEntrySchema, { maxItems: 100 })),
  routes: Type.Array(RouteEntrySchema, { minItems: 1 })
}, { additionalProperties: false })
export type RouteFile = Static<typeof RouteFileSchema>

/** A mistake in a route file: what is wrong, said for the file's author. */
export interface Problem {
  /** the route it is about; -1: the file as a whole */
  route: number
  text: string
}

/** at most this many problems are reported at once */
export const MAX_PROBLEMS = 20

/** "/routes/2/auth" -> "routes[2].auth" */
function fieldPath (pointer: string): string {
  return pointer.split('/').slice(1).reduce((path, part) =>
    /^\d+$/.test(part) ? `${path}[${part}]` : (path === '' ? part : `${path}.${part}`), '')
}

function describe (schema: TSchema): string {
  if (Array.isArray(schema.anyOf) && schema.anyOf.every((s: TSchema) => 'const' in s)) {
    return `one of ${schema.anyOf.map((s: TSchema) => String(s.const)).join(', ')}`
  }
  return String(schema.description ?? schema.type ?? 'valid')
}

function message (error: ValueError): string {
  const where = fieldPath(error.path)
  const shown = JSON.stringify(error.value)
  switch (error.type) {
    case ValueErrorType.Union:
      return `${where}: ${shown} is not ${describe(error.schema)}`
    case ValueErrorType.ObjectRequiredProperty:
      return `${where}: is required`
    case ValueErrorType.ObjectAdditionalProperties: {
      const known = Object.keys((error.schema as { properties?: object }).properties ?? {})
      return `${where}: is not a known field${known.length > 0 ? ` (known: ${known.join(', ')})` : ''}`
    }
    case ValueErrorType.String:
      return `${where}: must be a string, not ${shown}`
    case ValueErrorType.Integer:
    case ValueErrorType.Number:
      return `${where}: must be a whole number, not ${shown}`
    case ValueErrorType.Array:
      return `${where}: must be a list, not ${shown}`
    case ValueErrorType.Boolean:
      return `${where}: must be true or false, not ${shown}`
    case ValueErrorType.Object:
      return `${where === '' ? 'the file' : where}: must be a mapping of fields, not ${shown}`
    case ValueErrorType.StringPattern:
      return `${where}: ${shown} is not ${describe(error.schema)}`
    case ValueErrorType.ArrayUniqueItems:
      return `${where}: lists an item twice`
    case ValueErrorType.ArrayMinItems:
      return `${where}: must not be empty`
    default:
      return `${where}: ${shown} is not allowed (${error.message.toLowerCase()})`
  }
}

export function schemaProblems (document: unknown): Problem[] {
  const problems: Problem[] = []
  const seen = new Set<string>()
  for (const error of Value.Errors(RouteFileSchema, document)) {
    // One problem per field: a union or an additional property yields several errors for one path.
    if (seen.has(error.path)) continue
    seen.add(error.path)
    const route = /^\/routes\/(\d+)/.exec(error.path)?.[1]
    problems.push({ route: route === undefined ? -1 : Number(route), text: message(error) })
    if (problems.length >= MAX_PROBLEMS) break
  }
  return problems
}
