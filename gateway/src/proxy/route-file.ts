// The route file (KEYGATE_ROUTES): YAML or JSON, checked against one schema
// (route-file-schema.ts), then against the rules a schema cannot say (route-rules.ts), and made
// into routes with every default filled in. Every mistake is reported at once, each naming the
// file, the route and the field, and saying what is allowed.
import { readFile } from 'node:fs/promises'
import { basename } from 'node:path'
import { parse as parseYaml } from 'yaml'
import { HTTP_METHODS } from '#client/protocol'
import { ConfigError, type RouteDefaults } from '../config/env.js'
import { rateLimit, routeScope } from '../limits/rate-limit.js'
import { MAX_PROBLEMS, schemaProblems, type Problem, type RouteEntry, type RouteFile } from './route-file-schema.js'
import { resourcesFromEntries, routeResource, unusedResourceProblems } from './route-resources.js'
import { entryProblems, ruleProblems } from './route-rules.js'
import { compilePolicy } from '../mcp-calls/policy.js'
import type { ProtectedResource } from '../resources/resource.js'
import { DEFAULT_IDENTITY_HEADERS, route, type RouteConfig } from './route.js'

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

function toRoute (entry: RouteEntry, index: number, defaults: RouteDefaults, problems: Problem[],
  resources: ReadonlyMap<string, ProtectedResource>): RouteConfig | undefined {
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
  problems.push(...entryProblems(entry, index))
  const resource = routeResource(entry, index, resources, problems)
  if (entry.dpop !== undefined && entry.auth !== 'bearer' && entry.auth !== 'signed') {
    problems.push({ route: index, text: `${at}.dpop: DPoP binds tokens, which only bearer and signed routes take; give it auth: bearer or signed, or drop it` })
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
      agentKey: (entry.identityHeaders?.agentKey ?? DEFAULT_IDENTITY_HEADERS.agentKey).toLowerCase(),
      dpopKey: (entry.identityHeaders?.dpopKey ?? DEFAULT_IDENTITY_HEADERS.dpopKey).toLowerCase()
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
    ...(resource !== undefined && { resource }),
    // a resource that requires DPoP requires it of each of its routes
    ...((entry.dpop === 'required' || resource?.dpopRequired === true) && { dpop: 'required' as const }),
    ...(entry.mcp !== undefined && { mcp: compilePolicy(entry.mcp, scope) }),
    identityToken: entry.identityToken === undefined
      ? undefined
      : {
          header: (entry.identityToken.header ?? DEFAULT_IDENTITY_TOKEN_HEADER).toLowerCase(),
          ttlSeconds: entry.identityToken.ttlSeconds ?? DEFAULT_IDENTITY_TOKEN_TTL_SECONDS,
          audience: entry.identityToken.audience ?? origin
        }
  }, defaults)
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
  const resources = resourcesFromEntries((document as RouteFile).resources ?? [], problems)
  problems.push(...unusedResourceProblems(resources, entries))
  const broken = new Set(problems.map((p) => p.route))
  const converted = entries.map((entry, i) => broken.has(i) ? undefined : toRoute(entry, i, defaults, problems, resources))
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
