// The route file (KEYGATE_ROUTES): YAML or JSON, checked against one schema, then against the
// rules a schema cannot say (one of prefix/path, http(s) upstreams, no two routes for one
// prefix and method, no route over keygate's own endpoints, canonical paths, no rewrite that
// glues segments, rate limits each counted per something the route's tier knows and one limit per
// counter). Every mistake is reported at once, each naming the file, the route and the
// field, and saying what is allowed.
import { readFile } from 'node:fs/promises'
import { basename } from 'node:path'
import { Type, type Static, type TSchema } from '@sinclair/typebox'
import { agentOriginProblem } from '../agents/signature-agent.js'
import { Value, ValueErrorType, type ValueError } from '@sinclair/typebox/value'
import { parse as parseYaml } from 'yaml'
import { routeMatchesPath as matches } from './route-table.js'
import { AUTH_TIERS, DEFAULT_IDENTITY_HEADERS, route, type RouteConfig } from './route.js'
import { SEED_BODY_BOUNDARIES, SIGNATURE_SCHEME_POLICIES, UNSEEN_BODY_POLICIES } from '../auth/stage.js'
import { OVERRIDE_HEADERS } from './upstream-request.js'
import { PATH_NORMALISATIONS } from './backend-paths.js'
import { ConfigError, MAX_BODY_LIMIT, type RouteDefaults } from '../config/env.js'
import {
  BUCKET_PATTERN, MAX_LIMIT, MAX_WINDOW_SECONDS, RATE_LIMIT_BY, rateLimit, routeScope, STORE_DOWN_POLICIES, WINDOW_PATTERN
} from '../limits/rate-limit.js'
import { MAX_SCOPES, SCOPE_PATTERN, SCOPE_RULE } from '../users/scopes.js'
import { BODY_OPTIONAL_METHODS, HTTP_METHODS, requestTargetProblem } from '#client/protocol'

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
    agentKey: Type.Optional(IdentityHeaderName)
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
  backendNormalises: Type.Optional(Type.Array(Type.Union(PATH_NORMALISATIONS.map((n) => Type.Literal(n))), { uniqueItems: true }))
}, { additionalProperties: false })
export type RouteEntry = Static<typeof RouteEntrySchema>

export const RouteFileSchema = Type.Object({
  routes: Type.Array(RouteEntrySchema, { minItems: 1 })
}, { additionalProperties: false })
export type RouteFile = Static<typeof RouteFileSchema>

/**
 * keygate's own endpoints. A route may not match one, except the catch-alls "/" and "/v1/",
 * under which keygate's endpoints still answer first.
 */
export const RESERVED_PATHS = ['/v1/auth/token', '/v1/api-keys', '/.well-known/jwks.json', '/healthz', '/readyz', '/v1/time', '/v1/routes', '/v1/usage']
/**
 * keygate's own subtrees: /docs and everything under it (the docs page and its assets). A route
 * may neither cover one nor lie inside it; the catch-alls excepted, as above. The developer
 * portal's prefix, which is a setting, joins them through RouteDefaults.ownPrefixes.
 */
export const RESERVED_PREFIXES = ['/docs']
/** keygate's own endpoints under these (DELETE /v1/api-keys/:apiKey, GET /v1/api-keys/:apiKey/usage): no route may take a path in them */
export const RESERVED_SUBTREES = ['/v1/api-keys/']
const CATCH_ALL_PREFIXES = ['/', '/v1/']
export const DEFAULT_IDENTITY_TOKEN_HEADER = 'x-keygate-identity'
export const DEFAULT_IDENTITY_TOKEN_TTL_SECONDS = 300

export class RouteFileError extends ConfigError {
  override name = 'RouteFileError'
  readonly file: string
  readonly problems: string[]
  constructor (file: string, problems: string[]) {
    super(problems.map((problem) => `${file}: ${problem}`).join('\n'))
    this.file = file
    this.problems = problems
  }
}

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

interface Problem {
  /** the route it is about; -1: the file as a whole */
  route: number
  text: string
}

const MAX_PROBLEMS = 20

function schemaProblems (document: unknown): Problem[] {
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

function toRoute (entry: RouteEntry, index: number, defaults: RouteDefaults, problems: Problem[]): RouteConfig | undefined {
  const at = `routes[${index}]`
  if ((entry.prefix === undefined) === (entry.path === undefined)) {
    problems.push({
      route: index,
      text: `${at}: give either prefix (a path and everything under it) or path (one exact path), not ${entry.prefix === undefined ? 'neither' : 'both'}`
    })
    return undefined
  }
  let upstream: URL | undefined
  try {
    upstream = new URL(entry.upstream)
  } catch {}
  if (upstream === undefined || (upstream.protocol !== 'http:' && upstream.protocol !== 'https:')) {
    problems.push({ route: index, text: `${at}.upstream: ${JSON.stringify(entry.upstream)} is not an http(s) URL` })
  } else if (upstream.username !== '' || upstream.password !== '' || upstream.search !== '' || upstream.hash !== '') {
    problems.push({ route: index, text: `${at}.upstream: ${JSON.stringify(entry.upstream)} must be scheme://host[:port][/path] without credentials, query or fragment (send credentials with addHeaders)` })
  }
  if (entry.auth === 'agent' && entry.agents === undefined) {
    problems.push({ route: index, text: `${at}.agents: an agent route says which signed agents it lets in: any, or a list of their directory origins` })
  }
  if (entry.agents !== undefined && entry.auth === 'public') {
    problems.push({ route: index, text: `${at}.agents: a public route asks for nothing; give it auth: agent (or bearer or signed, for a user's agent)` })
  }
  for (const [i, origin] of (Array.isArray(entry.agents) ? entry.agents : []).entries()) {
    const originProblem = agentOriginProblem(origin)
    if (originProblem !== undefined) {
      problems.push({ route: index, text: `${at}.agents[${i}]: ${originProblem}` })
    }
  }
  if (entry.scopes !== undefined && entry.auth === 'agent') {
    problems.push({ route: index, text: `${at}.scopes: an agent route has no user whose scopes it could check; drop scopes` })
  }
  if (entry.scopes !== undefined && entry.auth === 'public') {
    problems.push({
      route: index,
      text: `${at}.scopes: a public route has no user whose scopes it could check; give it auth: bearer or signed, or drop scopes`
    })
  }
  if ((entry.signature !== undefined || entry.signatureLabel !== undefined) && entry.auth !== 'signed') {
    problems.push({
      route: index,
      text: `${at}.${entry.signature !== undefined ? 'signature' : 'signatureLabel'}: only a signed route verifies signatures; give it auth: signed, or drop it`
    })
  } else if (entry.signatureLabel !== undefined && entry.signature === 'seed') {
    problems.push({
      route: index,
      text: `${at}.signatureLabel: labels are RFC 9421's; a route with signature: seed has none (use rfc9421 or any, or drop signatureLabel)`
    })
  }
  if (entry.seedBodyBoundary !== undefined && (entry.auth !== 'signed' || entry.signature === 'rfc9421')) {
    problems.push({
      route: index,
      text: entry.auth !== 'signed'
        ? `${at}.seedBodyBoundary: only a signed route verifies seed signatures; give it auth: signed, or drop it`
        : `${at}.seedBodyBoundary: the rule is the seed scheme's, and this route takes RFC 9421 signatures only (signature: rfc9421), ` +
          'whose Content-Digest binds the body; drop it'
    })
  }
  if (entry.unseenBody === 'digest' && (entry.auth !== 'signed' || entry.signature === 'seed')) {
    problems.push({
      route: index,
      text: entry.auth !== 'signed'
        ? `${at}.unseenBody: only a signed route verifies a body's digest; give it auth: signed, or drop it`
        : `${at}.unseenBody: digest lets an RFC 9421 signature over content-digest pass, and this route takes the seed scheme only ` +
          '(signature: seed), which signs the body\'s bytes; use any or rfc9421, or drop it'
    })
  }
  if (entry.bodyOnMethods !== undefined) {
    const missing = entry.bodyOnMethods.filter((m) => !(entry.methods ?? HTTP_METHODS).includes(m))
    if (entry.auth !== 'signed') {
      problems.push({
        route: index,
        text: `${at}.bodyOnMethods: only a signed route refuses a body on DELETE and OPTIONS, so only one takes it back; drop it`
      })
    } else if (missing.length > 0) {
      problems.push({ route: index, text: `${at}.bodyOnMethods: ${missing.join(', ')} is not among the route's methods; add it there, or drop it here` })
    }
  }
  const exact = entry.path !== undefined
  const prefix = (entry.path ?? entry.prefix) as string
  const origin = upstream?.origin ?? entry.upstream
  const scope = routeScope({ prefix, exact, methods: entry.methods ?? HTTP_METHODS })
  return route({
    name: entry.name ?? at,
    prefix,
    exact,
    upstream: entry.upstream,
    auth: entry.auth,
    ...(entry.methods !== undefined && { methods: entry.methods }),
    rewrite: entry.rewrite,
    ...(entry.bodyLimit !== undefined && { bodyLimit: entry.bodyLimit }),
    ...(entry.timeoutMs !== undefined && { timeoutMs: entry.timeoutMs }),
    identityHeaders: {
      user: (entry.identityHeaders?.user ?? DEFAULT_IDENTITY_HEADERS.user).toLowerCase(),
      key: (entry.identityHeaders?.key ?? DEFAULT_IDENTITY_HEADERS.key).toLowerCase(),
      keyName: (entry.identityHeaders?.keyName ?? DEFAULT_IDENTITY_HEADERS.keyName).toLowerCase(),
      scopes: (entry.identityHeaders?.scopes ?? DEFAULT_IDENTITY_HEADERS.scopes).toLowerCase(),
      agent: (entry.identityHeaders?.agent ?? DEFAULT_IDENTITY_HEADERS.agent).toLowerCase(),
      agentKey: (entry.identityHeaders?.agentKey ?? DEFAULT_IDENTITY_HEADERS.agentKey).toLowerCase()
    },
    agents: entry.agents === undefined ? undefined : entry.agents === 'any' ? 'any' : new Set(entry.agents),
    addHeaders: Object.fromEntries(Object.entries(entry.addHeaders ?? {}).map(([name, value]) => [name.toLowerCase(), value])),
    removeHeaders: (entry.removeHeaders ?? []).map((name) => name.toLowerCase()),
    ...(entry.replay !== undefined && { replay: entry.replay }),
    ...(entry.signature !== undefined && { signature: entry.signature }),
    ...(entry.signatureLabel !== undefined && { signatureLabel: entry.signatureLabel }),
    ...(entry.seedBodyBoundary !== undefined && { seedBodyBoundary: entry.seedBodyBoundary }),
    ...(entry.unseenBody !== undefined && { unseenBody: entry.unseenBody }),
    ...(entry.bodyOnMethods !== undefined && { bodyOnMethods: [...entry.bodyOnMethods] }),
    ...(entry.allowMatrixParams !== undefined && { allowMatrixParams: entry.allowMatrixParams }),
    keepHeaders: (entry.keepHeaders ?? []).map((name) => name.toLowerCase()),
    rateLimits: (entry.rateLimits ?? []).map((limit) => rateLimit(limit, scope)),
    ...(entry.onStoreDown !== undefined && { onStoreDown: entry.onStoreDown }),
    ...(entry.scopes !== undefined && { scopes: entry.scopes }),
    ...(entry.backendNormalises !== undefined && { backendNormalises: entry.backendNormalises }),
    identityToken: entry.identityToken === undefined
      ? undefined
      : {
          header: (entry.identityToken.header ?? DEFAULT_IDENTITY_TOKEN_HEADER).toLowerCase(),
          ttlSeconds: entry.identityToken.ttlSeconds ?? DEFAULT_IDENTITY_TOKEN_TTL_SECONDS,
          audience: entry.identityToken.audience ?? origin
        }
  }, defaults)
}

/** Why a prefix, path or rewrite is not a canonical path (one a request may hold, ";" aside), or undefined. */
function pathProblem (value: string): string | undefined {
  if (value.includes(';')) {
    return 'The path has a ";" (matrix parameters), which routes are matched without and backends drop; ' +
      'a route takes them below its prefix with allowMatrixParams'
  }
  return requestTargetProblem(value)
}

/**
 * The rules of one route's paths: canonical (a prefix keygate refuses every request for could
 * never match; a rewrite must not make a path a backend reads as another), a rewrite that does
 * not glue segments, matrix parameters only below a prefix, keepHeaders only of the stripped ones.
 */
function routePathProblems (r: RouteConfig, i: number): Problem[] {
  const problems: Problem[] = []
  const field = r.exact ? 'path' : 'prefix'
  const prefixProblem = pathProblem(r.prefix)
  if (prefixProblem !== undefined) {
    problems.push({ route: i, text: `routes[${i}].${field}: ${JSON.stringify(r.prefix)} can never match: ${prefixProblem}` })
  }
  const rewriteProblem = r.rewrite === undefined ? undefined : pathProblem(r.rewrite)
  if (rewriteProblem !== undefined) {
    problems.push({ route: i, text: `routes[${i}].rewrite: ${JSON.stringify(r.rewrite)} is not a canonical path: ${rewriteProblem}` })
  }
  // A prefix ending in "/" hands on a rest that starts a segment ("-admin" of /reports/-admin),
  // which a rewrite not ending in "/" would glue onto its last segment (/v1/clients-admin). A
  // prefix without one hands on "" or "/...", which a rewrite ending in "/" would turn into
  // another path (/status into /health/). So: both end in "/", or neither.
  if (!r.exact && r.rewrite !== undefined && rewriteProblem === undefined && r.prefix.endsWith('/') !== r.rewrite.endsWith('/')) {
    const [prefix, rewrite] = [JSON.stringify(r.prefix), JSON.stringify(r.rewrite)]
    problems.push({
      route: i,
      text: r.prefix.endsWith('/')
        ? `routes[${i}].rewrite: ${rewrite} glues segments: the prefix ${prefix} ends in "/" and the rewrite does not, ` +
          `so ${r.prefix}-admin would be forwarded as ${r.rewrite}-admin; end both in "/" or neither`
        : `routes[${i}].rewrite: ${rewrite} ends in "/" and the prefix ${prefix} does not, so ${r.prefix} would be forwarded as ${r.rewrite}, ` +
          'another path; end both in "/" or neither'
    })
  }
  if (r.exact && r.allowMatrixParams) {
    problems.push({ route: i, text: `routes[${i}].allowMatrixParams: an exact path takes no matrix parameters; only a prefix route does, below its prefix` })
  }
  r.keepHeaders.forEach((name, j) => {
    if (!OVERRIDE_HEADERS.includes(name)) {
      problems.push({
        route: i,
        text: `routes[${i}].keepHeaders[${j}]: ${JSON.stringify(name)} is not one of the headers keygate strips (${OVERRIDE_HEADERS.join(', ')}); ` +
          'other client headers are forwarded anyway'
      })
    }
  })
  return problems
}

/**
 * The rules of one route's rate limits: windows within a year, each counted per something its
 * tier knows (an API key only on signed routes, a user not on public or agent ones, an agent only on routes that take agents), one limit per counter,
 * onStoreDown only with limits.
 */
function rateLimitProblems (r: RouteConfig, i: number, hasOnStoreDown: boolean): Problem[] {
  const problems: Problem[] = []
  const at = `routes[${i}].rateLimits`
  r.rateLimits.forEach((limit, j) => {
    if (limit.windowMs > MAX_WINDOW_SECONDS * 1000) {
      problems.push({ route: i, text: `${at}[${j}].window: ${JSON.stringify(limit.window)} is longer than the longest window, 366d` })
    }
    if (limit.by === 'key' && r.auth !== 'signed') {
      problems.push({
        route: i,
        text: `${at}[${j}].by: "key" counts per API key, which only a signed route knows; this route is ${r.auth} ` +
          `(count by ${r.auth === 'agent' ? 'agent or address' : r.auth === 'public' ? 'address' : 'user or address'})`
      })
    }
    if (limit.by === 'user' && r.auth === 'public') {
      problems.push({ route: i, text: `${at}[${j}].by: "user" counts per user, which a public route does not know (count by address)` })
    }
    if (limit.by === 'user' && r.auth === 'agent') {
      problems.push({
        route: i,
        text: `${at}[${j}].by: "user" counts per user, and an agent route has none: it knows the signed agent (count by agent or address)`
      })
    }
    if (limit.by === 'agent' && r.agents === undefined) {
      problems.push({
        route: i,
        text: `${at}[${j}].by: "agent" counts per signed agent, which only a route that takes agents knows (auth: agent, or a bearer or ` +
          `signed route naming agents); this route is ${r.auth} without agents (count by ${r.auth === 'public' ? 'address' : 'user or address'})`
      })
    }
    const earlier = r.rateLimits.findIndex((other) => other.counter === limit.counter)
    if (earlier < j) {
      problems.push({
        route: i,
        text: `${at}[${j}]: counts in the same counter as rateLimits[${earlier}] (by ${limit.by} per ${limit.window}` +
          `${limit.bucket === undefined ? '' : `, bucket ${limit.bucket}`}); give each counter one limit`
      })
    }
  })
  if (hasOnStoreDown && r.rateLimits.length === 0) {
    problems.push({ route: i, text: `routes[${i}].onStoreDown: applies only to a route with rateLimits` })
  }
  return problems
}

/** A bucket's counter is one: every route that shares it must give it the same limit and window. */
function bucketProblems (routes: Array<RouteConfig | undefined>): Problem[] {
  const problems: Problem[] = []
  const first = new Map<string, { limit: RouteConfig['rateLimits'][number]; at: string }>()
  routes.forEach((r, i) => {
    r?.rateLimits.forEach((limit, j) => {
      if (limit.bucket === undefined) return
      const at = `routes[${i}].rateLimits[${j}]`
      const seen = first.get(limit.counter)
      if (seen === undefined) {
        first.set(limit.counter, { limit, at })
      } else if (seen.at.split('.')[0] !== at.split('.')[0] && (seen.limit.limit !== limit.limit || seen.limit.window !== limit.window)) {
        problems.push({
          route: i,
          text: `${at}: bucket ${JSON.stringify(limit.bucket)} by ${limit.by} is ${limit.limit} per ${limit.window} here and ` +
            `${seen.limit.limit} per ${seen.limit.window} in ${seen.at}; a shared counter has one limit: give both the same, or another bucket`
        })
      }
    })
  })
  return problems
}

function ruleProblems (routes: Array<RouteConfig | undefined>, entries: readonly RouteEntry[] = [], ownPrefixes: readonly string[] = []): Problem[] {
  const problems: Problem[] = []
  problems.push(...bucketProblems(routes))
  routes.forEach((r, i) => {
    if (r === undefined) return
    problems.push(...routePathProblems(r, i))
    problems.push(...rateLimitProblems(r, i, entries[i]?.onStoreDown !== undefined))
    const field = r.exact ? 'path' : 'prefix'
    const catchAll = !r.exact && CATCH_ALL_PREFIXES.includes(r.prefix)
    for (const reserved of RESERVED_PATHS) {
      if (matches(r.prefix, r.exact, reserved) && !catchAll) {
        problems.push({ route: i, text: `routes[${i}].${field}: ${JSON.stringify(r.prefix)} would shadow keygate's own ${reserved}; route a path outside it` })
      }
    }
    for (const reserved of [...RESERVED_PREFIXES, ...ownPrefixes]) {
      if ((matches(r.prefix, r.exact, reserved) || matches(reserved, false, r.prefix)) && !catchAll) {
        problems.push({
          route: i,
          text: `routes[${i}].${field}: ${JSON.stringify(r.prefix)} would shadow keygate's own ${reserved} ` +
            '(and every path under it); route a path outside it'
        })
      }
    }
    for (const subtree of RESERVED_SUBTREES) {
      if (!catchAll && !RESERVED_PATHS.some((p) => matches(r.prefix, r.exact, p)) &&
        (r.prefix.startsWith(subtree) || matches(r.prefix, r.exact, subtree))) {
        problems.push({
          route: i,
          text: `routes[${i}].${field}: ${JSON.stringify(r.prefix)} would shadow keygate's own ${subtree}...; route a path outside it`
        })
      }
    }
    for (let j = 0; j < i; j++) {
      const other = routes[j]
      if (other === undefined || other.exact !== r.exact || other.prefix !== r.prefix) continue
      const shared = r.methods.filter((m) => other.methods.includes(m))
      if (shared.length > 0) {
        problems.push({
          route: i,
          text: `routes[${i}]: ${field} ${JSON.stringify(r.prefix)} with ${shared.join(', ')} is already routed by routes[${j}]; give each method one route`
        })
      }
    }
  })
  return problems
}

/**
 * A parsed route file -> routes with every default filled in; RouteFileError with every problem:
 * the routes that pass the schema are also checked against the rules, so one run shows all.
 */
export function routesFromDocument (document: unknown, file: string, defaults: RouteDefaults): RouteConfig[] {
  const problems = schemaProblems(document)
  const entries = (document as Partial<RouteFile> | null)?.routes
  if (problems.some((p) => p.route === -1) || !Array.isArray(entries)) {
    throw new RouteFileError(file, problems.map((p) => p.text))
  }
  const broken = new Set(problems.map((p) => p.route))
  const converted = entries.map((entry, i) => broken.has(i) ? undefined : toRoute(entry, i, defaults, problems))
  problems.push(...ruleProblems(converted, entries, defaults.ownPrefixes))
  if (problems.length > 0) {
    // Stable order: by route, schema problems before rule problems within a route.
    const ordered = problems.map((p, i) => ({ ...p, i })).sort((x, y) => x.route - y.route || x.i - y.i)
    throw new RouteFileError(file, ordered.slice(0, MAX_PROBLEMS).map((p) => p.text))
  }
  return converted as RouteConfig[]
}

export function parseRouteText (text: string, file: string): unknown {
  try {
    // JSON is YAML; one parser reads both. Duplicate keys are an error, not a silent override.
    return parseYaml(text, { uniqueKeys: true, prettyErrors: true })
  } catch (err) {
    // The parser's first line says what and where ("... at line 5, column 5:"); the rest is an excerpt.
    const first = (err as Error).message.split('\n')[0] ?? ''
    throw new RouteFileError(file, [`cannot be parsed: ${first.replace(/:$/, '')}`])
  }
}

/** Reads, parses and checks a route file. */
export async function loadRouteFile (path: string, defaults: RouteDefaults): Promise<RouteConfig[]> {
  const file = basename(path)
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    throw new RouteFileError(path, [`cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`])
  }
  return routesFromDocument(parseRouteText(text, file), file, defaults)
}
