// An MCP route's policy: which scopes each tool (tools/call by params.name), resource
// (resources/read by params.uri), prompt (prompts/get by params.name) and other method asks for,
// beyond the route's own scopes. Names are exact or globs with `*` (any run of characters, "/"
// included); the most specific rule wins: an exact name beats any glob, then the glob with the
// longer literal prefix, then the longer literal text, then the one listed first. An unlisted
// tool, resource or prompt takes `default`; an unlisted other method asks for nothing more.
import { createHash } from 'node:crypto'
import { rateLimit, type RateLimit } from '../limits/rate-limit.js'
import type { McpMessage } from './messages.js'

/** the scopes a call asks for, all of them ([]: the route's scopes suffice), or `deny`: never through this route */
export type Requirement = readonly string[] | 'deny'

interface GlobRule<T> { pattern: string; parts: readonly string[]; prefix: number; literal: number; requirement: T }
/** names (exact, or globs) to what each asks: a requirement, or (tool-limits.ts) a tool's rate limits */
export interface NameRules<T = Requirement> { exact: ReadonlyMap<string, T>; globs: ReadonlyArray<GlobRule<T>> }

export interface McpPolicy {
  tools: NameRules
  resources: NameRules
  prompts: NameRules
  methods: NameRules
  /** for a tool, resource or prompt no rule names */
  default: Requirement
  /** the Origin values a request may carry (absent Origin passes) */
  origins: ReadonlySet<string>
  /** sessions (mcp/sessions.ts): each belongs to the identity whose initialize the upstream answered with it, for ttlSeconds after its last use */
  sessions: { ttlSeconds: number }
  /** the tool names (exact, or globs) metrics, usage and traces label by: those `tools` and `toolRateLimits` list (labels.ts) */
  toolLabels: NameRules<true>
  /** the tools' own rate limits (tool-limits.ts); absent when `toolRateLimits` names none */
  toolLimits?: NameRules<readonly RateLimit[]>
  /**
   * event streams (SSE answers to POSTs, the GET stream): the upstream may be silent this long
   * between two bytes of an answer (keep-alive comments are bytes) before keygate cuts it; in
   * place of timeoutMs, which still bounds the wait for the answer's headers
   */
  streams: { idleSeconds: number }
  /** as the route file says it (the admin API and `keygate routes check --json` show this) */
  toJSON: () => McpEntry
}

/** The route file's `mcp` object, as the schema checks it. */
export interface McpEntry {
  tools?: Record<string, string[] | 'deny'>
  resources?: Record<string, string[] | 'deny'>
  prompts?: Record<string, string[] | 'deny'>
  methods?: Record<string, string[] | 'deny'>
  default?: string[] | 'deny'
  origins?: string[]
  sessions?: { ttlSeconds?: number }
  /** a tool's own rate limits and quotas (tool-limits.ts), by name (exact, or globs) as `tools` */
  toolRateLimits?: Record<string, Array<{ by: 'key' | 'user' | 'agent' | 'address'; limit: number; window: string; bucket?: string }>>
  streams?: { idleSeconds?: number }
}

/** An MCP session is forgotten after this long unused (each request in it renews it), unless the route says otherwise. */
export const DEFAULT_MCP_SESSION_TTL_SECONDS = 86_400
export const MAX_MCP_SESSION_TTL_SECONDS = 30 * 86_400

/**
 * An answer's stream is cut after this long without a byte from the upstream, unless the route
 * says otherwise: 20 times the SDK servers' keep-alive interval (15 s), so a live stream is never
 * cut, and a dead one is let go within minutes (an MCP client opens its GET stream again).
 */
export const DEFAULT_MCP_STREAM_IDLE_SECONDS = 300
export const MAX_MCP_STREAM_IDLE_SECONDS = 86_400

/** the methods judged by their own maps: `methods` may not name them */
export const NAMED_METHODS: ReadonlyMap<string, NamedKind> = new Map([
  ['tools/call', 'tools'],
  ['resources/read', 'resources'],
  ['prompts/get', 'prompts']
])

/**
 * Whether `name` matches the glob split at its `*`s: the first part a prefix, the last a suffix,
 * the others found in order, each as early as it occurs (for `*`-only globs the earliest is never
 * wrong). No regular expression: a caller's name of a megabyte costs a few indexOf calls, never a
 * backtracking search.
 */
function globMatches (parts: readonly string[], name: string): boolean {
  const first = parts[0] ?? ''
  const last = parts[parts.length - 1] ?? ''
  if (name.length < first.length + last.length || !name.startsWith(first) || !name.endsWith(last)) return false
  let at = first.length
  const end = name.length - last.length
  for (let i = 1; i < parts.length - 1; i++) {
    const part = parts[i] as string
    const found = name.indexOf(part, at)
    if (found < 0 || found + part.length > end) return false
    at = found + part.length
  }
  return true
}

export function compileRules<T = Requirement> (map: Readonly<Record<string, T>> = {}): NameRules<T> {
  const exact = new Map<string, T>()
  const globs: Array<GlobRule<T>> = []
  for (const [pattern, requirement] of Object.entries(map)) {
    if (!pattern.includes('*')) {
      exact.set(pattern, requirement)
      continue
    }
    const parts = pattern.split('*')
    globs.push({
      pattern,
      parts,
      prefix: (parts[0] ?? '').length,
      literal: parts.join('').length,
      requirement
    })
  }
  // stable: equal rules keep the file's order
  globs.sort((a, b) => b.prefix - a.prefix || b.literal - a.literal)
  return { exact, globs }
}

/** The rule for `name`: the most specific that matches, or undefined. */
export function lookup<T> (rules: NameRules<T>, name: string): { pattern: string; requirement: T } | undefined {
  const exact = rules.exact.get(name)
  if (exact !== undefined) return { pattern: name, requirement: exact }
  const glob = rules.globs.find((rule) => globMatches(rule.parts, name))
  return glob === undefined ? undefined : { pattern: glob.pattern, requirement: glob.requirement }
}

/**
 * Every scope the policy may ask for (its tools', resources', prompts', methods' and default's),
 * once each: with the route's own, the scopes a client may need for this route (a protected
 * resource's metadata lists them, so that a client registers for what a step-up will ask).
 */
export function policyScopes (policy: Pick<McpPolicy, 'toJSON'>): string[] {
  const { tools, resources, prompts, methods, default: fallback } = policy.toJSON()
  const requirements = [tools, resources, prompts, methods].flatMap((map) => Object.values(map ?? {}))
  if (fallback !== undefined) requirements.push(fallback)
  return [...new Set(requirements.flatMap((requirement) => requirement === 'deny' ? [] : requirement))]
}

/**
 * A tool's limit: its own counter (the route's scope, then the rule's pattern, hashed: a name of a
 * kilobyte makes no longer key), or its bucket's, shared like any; its policy name says "tool".
 */
function toolLimit (entry: NonNullable<McpEntry['toolRateLimits']>[string][number], scope: string, pattern: string): RateLimit {
  const limit = rateLimit(entry, `${scope}:t:${createHash('sha256').update(pattern).digest('base64url').slice(0, 16)}`)
  return limit.bucket === undefined ? { ...limit, policy: `tool-${limit.policy}` } : limit
}

/** `scope`: the route's counter scope (limits/rate-limit.ts: routeScope), which the tools' own counters are under */
export function compilePolicy (entry: McpEntry, scope = ''): McpPolicy {
  const toolRateLimits = entry.toolRateLimits === undefined || Object.keys(entry.toolRateLimits).length === 0
    ? undefined
    : Object.fromEntries(Object.entries(entry.toolRateLimits).map(([pattern, limits]) =>
      [pattern, limits.map((limit) => toolLimit(limit, scope, pattern))]))
  return {
    ...(toolRateLimits !== undefined && { toolLimits: compileRules<readonly RateLimit[]>(toolRateLimits) }),
    tools: compileRules(entry.tools),
    resources: compileRules(entry.resources),
    prompts: compileRules(entry.prompts),
    methods: compileRules(entry.methods),
    default: entry.default ?? [],
    origins: new Set(entry.origins ?? []),
    sessions: { ttlSeconds: entry.sessions?.ttlSeconds ?? DEFAULT_MCP_SESSION_TTL_SECONDS },
    toolLabels: compileRules(Object.fromEntries([...Object.keys(entry.tools ?? {}), ...Object.keys(entry.toolRateLimits ?? {})]
      .map((name) => [name, true as const]))),
    streams: { idleSeconds: entry.streams?.idleSeconds ?? DEFAULT_MCP_STREAM_IDLE_SECONDS },
    toJSON: () => entry
  }
}

export type NamedKind = 'tools' | 'resources' | 'prompts'

/** The requirement of the tool, resource (by URI) or prompt `name`: its most specific rule's, or the default. */
export function requirementOf (policy: McpPolicy, kind: NamedKind, name: string): Requirement {
  const rule = lookup(policy[kind], name)
  return rule === undefined ? policy.default : rule.requirement
}

/**
 * What `requirement` leaves a caller holding `granted` without: `deny`, the scopes it lacks (in
 * the requirement's order), or [] when the caller may. The ONE rule of "may use": auth/mcp.ts
 * refuses a call by it, and mcp/list-filter.ts hides a list's entry by it.
 */
export function shortfall (requirement: Requirement, granted: ReadonlySet<string>): string[] | 'deny' {
  return requirement === 'deny' ? 'deny' : requirement.filter((scope) => !granted.has(scope))
}

function permits (requirement: Requirement, granted: ReadonlySet<string>): boolean {
  const missing = shortfall(requirement, granted)
  return missing !== 'deny' && missing.length === 0
}

/** Whether a caller holding `granted` may use the tool, resource or prompt `name` (beyond the route's own scopes, which it has). */
export function mayUse (policy: McpPolicy, kind: NamedKind, name: string, granted: ReadonlySet<string>): boolean {
  return permits(requirementOf(policy, kind, name), granted)
}

/**
 * What EVERY name that begins with `prefix` asks, together (a resource template's URIs:
 * mcp/list-filter.ts, completion/complete): `deny` when any may be denied, else the scopes of
 * every rule that could decide such a name. Sound, not exact: each exact name that begins with
 * `prefix`, each glob that some such name can match (its text before the first `*` and `prefix`
 * are one the other's prefix), and the default unless one glob `<p>*` with `prefix` beginning
 * with `<p>` takes every such name.
 */
export function requirementUnder (policy: McpPolicy, kind: NamedKind, prefix: string): Requirement {
  const rules = policy[kind]
  const requirements: Requirement[] = []
  for (const [name, requirement] of rules.exact) if (name.startsWith(prefix)) requirements.push(requirement)
  let covered = false
  for (const glob of rules.globs) {
    const head = glob.parts[0] ?? ''
    if (!(prefix.startsWith(head) || head.startsWith(prefix))) continue
    requirements.push(glob.requirement)
    // `<head>*`: every name beginning with `prefix` matches it, so the default decides none of them
    if (glob.parts.length === 2 && glob.parts[1] === '' && prefix.startsWith(head)) covered = true
  }
  if (!covered) requirements.push(policy.default)
  return all(requirements)
}

/** Requirements together: `deny` if any is, else every scope any asks for. */
function all (requirements: readonly Requirement[]): Requirement {
  if (requirements.includes('deny')) return 'deny'
  return [...new Set((requirements as ReadonlyArray<readonly string[]>).flat())]
}

/** Whether a caller holding `granted` may use EVERY name that begins with `prefix` (requirementUnder). */
export function mayUseAllUnder (policy: McpPolicy, kind: NamedKind, prefix: string, granted: ReadonlySet<string>): boolean {
  return permits(requirementUnder(policy, kind, prefix), granted)
}

/**
 * Methods that name a resource or a prompt without being resources/read or prompts/get: judged by
 * `methods` AND by the rule of what they name, so that a caller who may not read a resource may
 * not subscribe to its updates, nor have its template's or a prompt's arguments completed.
 * messages.ts has checked that the names are there.
 */
function alsoNamed (message: McpMessage): { kind: NamedKind, name: string, template: boolean } | undefined {
  const params = message.params
  switch (message.method) {
    case 'resources/subscribe':
    case 'resources/unsubscribe':
      return { kind: 'resources', name: String(params?.uri), template: false }
    case 'completion/complete': {
      const ref = params?.ref as { type?: unknown, name?: unknown, uri?: unknown } | undefined
      return ref?.type === 'ref/prompt'
        ? { kind: 'prompts', name: String(ref.name), template: false }
        : { kind: 'resources', name: String(ref?.uri), template: true }
    }
    default:
      return undefined
  }
}

/** What a message asks of the caller: what it is called (for refusals), and the requirement. */
export interface Judged { what: string; requirement: Requirement }

/** The requirement of one message: undefined when it asks nothing beyond the route's scopes (responses, unlisted methods). */
export function judge (policy: McpPolicy, message: McpMessage): Judged | undefined {
  const method = message.method
  if (method === undefined) return undefined
  const kind = NAMED_METHODS.get(method)
  if (kind === undefined) {
    const rule = lookup(policy.methods, method)
    const named = alsoNamed(message)
    if (named === undefined) return rule === undefined ? undefined : { what: `the method ${method}`, requirement: rule.requirement }
    const { kind: namedKind, name, template } = named
    const brace = template ? name.indexOf('{') : -1
    const requirement = brace < 0 ? requirementOf(policy, namedKind, name) : requirementUnder(policy, namedKind, name.slice(0, brace))
    const noun = namedKind === 'resources' ? 'resource' : 'prompt'
    return {
      what: `the method ${method} on the ${noun} ${JSON.stringify(name)}`,
      requirement: rule === undefined ? requirement : all([rule.requirement, requirement])
    }
  }
  const name = String(message.params?.[kind === 'resources' ? 'uri' : 'name'])
  const noun = kind === 'tools' ? 'tool' : kind === 'resources' ? 'resource' : 'prompt'
  return { what: `the ${noun} ${JSON.stringify(name)}`, requirement: requirementOf(policy, kind, name) }
}
