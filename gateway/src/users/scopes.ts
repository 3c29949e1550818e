// Scopes: what a user may do, granted by an operator, narrowed per key, required by routes. The
// one rule of what a scope looks like lives here, and every place that takes scopes (the store's
// callers, registration, the route file, the CLI) checks them with it. A scope is a short token
// without spaces, because upstreams receive them space-separated (as OAuth's `scope` is).
// Here and not in auth/: users and keys (a layer below auth) check scopes too.
import { GatewayError } from '../errors.js'

/** 1-64 letters, digits, ":", ".", "_", "-" or "/": `clients:read`, `billing/invoices.write` */
export const SCOPE_PATTERN = '^[A-Za-z0-9:._/-]{1,64}$'
export const SCOPE_RULE = '1-64 letters, digits, ":", ".", "_", "-" or "/" (no spaces)'
/** the most scopes a user (and so a key, or a route) may hold */
export const MAX_SCOPES = 64

const SCOPE = new RegExp(SCOPE_PATTERN)

export function isScope (value: unknown): value is string {
  return typeof value === 'string' && SCOPE.test(value)
}

/** Why `values` is not a list of scopes, or undefined: each bad one named with the rule. */
export function scopeProblem (values: unknown): string | undefined {
  if (!Array.isArray(values)) return 'must be a list of scopes'
  const bad = values.filter((value) => !isScope(value))
  if (bad.length > 0) {
    return `${bad.map((value) => JSON.stringify(value)).join(', ')} ${bad.length === 1 ? 'is not a scope' : 'are not scopes'}: ${SCOPE_RULE}`
  }
  if (new Set(values).size > MAX_SCOPES) return `at most ${MAX_SCOPES} scopes, not ${new Set(values).size}`
  return undefined
}

/**
 * The scopes as stored: checked, each once, sorted (so two grants of one set compare and read
 * alike); VALIDATION_FAILED naming the bad ones and the rule, as a problem of `field`.
 */
export function normaliseScopes (values: unknown, field = 'scopes'): string[] {
  const problem = scopeProblem(values)
  if (problem !== undefined) throw new GatewayError('VALIDATION_FAILED', `${field}: ${problem}`, { extra: { errors: [{ field, message: problem }] } })
  return [...new Set(values as string[])].sort()
}

/** The scopes of `wanted` that `granted` lacks, in the order `wanted` lists them. */
export function missingScopes (wanted: readonly string[], granted: ReadonlySet<string>): string[] {
  return wanted.filter((scope) => !granted.has(scope))
}

/**
 * A set of scopes as a request carries them: the list, a set to test against, and the text
 * upstreams receive (space-separated). Made once per set and shared, so a request allocates none.
 */
export interface ScopeSet {
  readonly list: readonly string[]
  readonly set: ReadonlySet<string>
  /** space-separated, in the list's order; "" for none */
  readonly text: string
}

export function scopeSet (list: readonly string[]): ScopeSet {
  return { list, set: new Set(list), text: list.join(' ') }
}

export const NO_SCOPES: ScopeSet = scopeSet([])

/** The scopes of `a` that `b` holds too: `a` itself when that is all of them (nothing new made). */
export function intersectScopes (a: ScopeSet, b: ScopeSet): ScopeSet {
  return a.list.every((scope) => b.set.has(scope)) ? a : scopeSet(a.list.filter((scope) => b.set.has(scope)))
}

/** The scopes of either (sorted, each once): `a` itself when `b` adds none (nothing new made). */
export function unionScopes (a: ScopeSet, b: ScopeSet): ScopeSet {
  return b.list.every((scope) => a.set.has(scope)) ? a : scopeSet([...new Set([...a.list, ...b.list])].sort())
}

/** VALIDATION_FAILED for scopes asked of a key that its user does not hold, naming them. */
export function notHeldError (extra: readonly string[], held: readonly string[], who: string): GatewayError {
  const message = `${extra.join(', ')} ${extra.length === 1 ? 'is' : 'are'} not among the scopes of ${who} ` +
    `(${held.length === 0 ? 'none' : held.join(', ')}); a key may have only scopes its user has (an operator grants them)`
  return new GatewayError('VALIDATION_FAILED', `scopes: ${message}`, { extra: { errors: [{ field: 'scopes', message }] } })
}
