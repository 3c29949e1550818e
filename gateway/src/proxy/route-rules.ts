// The rules of a route file that a schema cannot say: each entry's fields as its tier allows
// them, canonical paths, no rewrite that glues segments, no route over keygate's own endpoints,
// no two routes for one prefix and method, rate limits each counted per something the route's
// tier knows and one limit per counter.
import { HTTP_METHODS, requestTargetProblem } from '#client/protocol'
import { agentOriginProblem } from '../agents/signature-agent.js'
import { MAX_WINDOW_SECONDS, type RateLimit } from '../limits/rate-limit.js'
import { NAMED_METHODS } from '../mcp-calls/policy.js'
import { METADATA_PATH } from '../resources/resource.js'
import type { Problem, RouteEntry } from './route-file-schema.js'
import { routeMatchesPath as matches } from './route-table.js'
import type { RouteConfig } from './route.js'
import { OVERRIDE_HEADERS } from './upstream-request.js'

/**
 * keygate's own endpoints. A route may not match one, except the catch-alls "/" and "/v1/",
 * under which keygate's endpoints still answer first.
 */
export const RESERVED_PATHS = [
  '/v1/auth/token', '/v1/api-keys', '/.well-known/jwks.json', '/healthz', '/readyz', '/v1/time', '/v1/routes', '/v1/usage', METADATA_PATH
]
/**
 * keygate's own subtrees: /docs and everything under it (the docs page and its assets). A route
 * may neither cover one nor lie inside it; the catch-alls excepted, as above. The developer
 * portal's prefix, which is a setting, joins them through RouteDefaults.ownPrefixes.
 */
export const RESERVED_PREFIXES = ['/docs']
/**
 * keygate's own endpoints under these (DELETE /v1/api-keys/:apiKey, GET /v1/api-keys/:apiKey/usage,
 * a protected resource's metadata): no route may take a path in them
 */
export const RESERVED_SUBTREES = ['/v1/api-keys/', `${METADATA_PATH}/`]
const CATCH_ALL_PREFIXES = ['/', '/v1/']

/**
 * The rules of one entry's fields that depend on its tier and on each other: which tier takes
 * agents, scopes, signature settings and body rules, and which combinations mean nothing.
 */
export function entryProblems (entry: RouteEntry, index: number): Problem[] {
  const problems: Problem[] = []
  const at = `routes[${index}]`
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
  if (entry.mcp !== undefined) problems.push(...mcpProblems(entry, index))
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
  return problems
}

/**
 * An MCP route's policy: scopes only where the tier knows a user's, tools/call, resources/read and
 * prompts/get judged by their own maps (not `methods`), origins as browsers send them.
 */
function mcpProblems (entry: RouteEntry, index: number): Problem[] {
  const problems: Problem[] = []
  const at = `routes[${index}].mcp`
  const mcp = entry.mcp ?? {}
  for (const method of Object.keys(mcp.methods ?? {})) {
    const own = NAMED_METHODS.get(method)
    if (own !== undefined) problems.push({ route: index, text: `${at}.methods: ${method} is judged per name by mcp.${own}; list it there` })
  }
  if (entry.auth === 'agent' || entry.auth === 'public') {
    const lists = [mcp.default, ...(['tools', 'resources', 'prompts', 'methods'] as const).flatMap((kind) => Object.values(mcp[kind] ?? {}))]
    if (lists.some((requirement) => Array.isArray(requirement) && requirement.length > 0)) {
      problems.push({
        route: index,
        text: `${at}: ${entry.auth === 'agent' ? 'an agent' : 'a public'} route has no user whose scopes it could check; ` +
          'give it auth: bearer or signed, or use [] and deny only'
      })
    }
  }
  for (const [i, origin] of (mcp.origins ?? []).entries()) {
    let serialised: string | undefined
    try { serialised = new URL(origin).origin } catch {}
    if (serialised !== origin || !/^https?:/.test(origin)) {
      problems.push({ route: index, text: `${at}.origins[${i}]: ${JSON.stringify(origin)} is not an origin as a browser sends it (scheme://host[:port], lower case, no path)` })
    }
  }
  return problems
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
  const problems = limitListProblems(r, i, r.rateLimits, `routes[${i}].rateLimits`, 'rateLimits')
  // a tool's limits (mcp.toolRateLimits): the same rules, and no counter of the route's own (a request would count in it once)
  const tools = toolLimitLists(r, i)
  for (const [at, limits] of tools) {
    problems.push(...limitListProblems(r, i, limits, at, at.slice(at.indexOf('.') + 1)))
    limits.forEach((limit, j) => {
      const shared = r.rateLimits.findIndex((other) => other.counter === limit.counter)
      if (shared >= 0) {
        problems.push({ route: i, text: `${at}[${j}]: counts in the same counter as the route's rateLimits[${shared}]; give the tool another bucket` })
      }
    })
  }
  if (hasOnStoreDown && r.rateLimits.length === 0 && tools.length === 0) {
    problems.push({ route: i, text: `routes[${i}].onStoreDown: applies only to a route with rateLimits` })
  }
  return problems
}

/** An MCP route's tool limits, each entry's list with where it is in the file. */
function toolLimitLists (r: RouteConfig, i: number): Array<[string, readonly RateLimit[]]> {
  const rules = r.mcp?.toolLimits
  if (rules === undefined) return []
  return Object.keys(r.mcp?.toJSON().toolRateLimits ?? {}).map((pattern) => [
    `routes[${i}].mcp.toolRateLimits[${JSON.stringify(pattern)}]`,
    rules.exact.get(pattern) ?? rules.globs.find((rule) => rule.pattern === pattern)?.requirement ?? []
  ])
}

/** One list of limits (a route's, or a tool's): `at` names it in problems, `field` in a duplicate's. */
function limitListProblems (r: RouteConfig, i: number, limits: readonly RateLimit[], at: string, field: string): Problem[] {
  const problems: Problem[] = []
  limits.forEach((limit, j) => {
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
    const earlier = limits.findIndex((other) => other.counter === limit.counter)
    if (earlier < j) {
      problems.push({
        route: i,
        text: `${at}[${j}]: counts in the same counter as ${field}[${earlier}] (by ${limit.by} per ${limit.window}` +
          `${limit.bucket === undefined ? '' : `, bucket ${limit.bucket}`}); give each counter one limit`
      })
    }
  })
  return problems
}

/** A bucket's counter is one: every route that shares it must give it the same limit and window. */
function bucketProblems (routes: Array<RouteConfig | undefined>): Problem[] {
  const problems: Problem[] = []
  const first = new Map<string, { limit: RouteConfig['rateLimits'][number]; at: string; list: string }>()
  routes.forEach((r, i) => {
    if (r === undefined) return
    const lists: Array<[string, readonly RateLimit[]]> = [[`routes[${i}].rateLimits`, r.rateLimits], ...toolLimitLists(r, i)]
    for (const [list, limits] of lists) {
      limits.forEach((limit, j) => {
        if (limit.bucket === undefined) return
        const at = `${list}[${j}]`
        const seen = first.get(limit.counter)
        if (seen === undefined) {
          first.set(limit.counter, { limit, at, list })
        } else if (seen.list !== list && (seen.limit.limit !== limit.limit || seen.limit.window !== limit.window)) {
          problems.push({
            route: i,
            text: `${at}: bucket ${JSON.stringify(limit.bucket)} by ${limit.by} is ${limit.limit} per ${limit.window} here and ` +
            `${seen.limit.limit} per ${seen.limit.window} in ${seen.at}; a shared counter has one limit: give both the same, or another bucket`
          })
        }
      })
    }
  })
  return problems
}

export function ruleProblems (routes: Array<RouteConfig | undefined>, entries: readonly RouteEntry[] = [], ownPrefixes: readonly string[] = []): Problem[] {
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
