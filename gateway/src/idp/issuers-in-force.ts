// The trusted issuers in force, swapped whole when the issuers file is reloaded (proxy/config-reload.ts,
// docs/routes.md#reloading). Each set of issuers is a generation: the issuers, their keys, a
// verifier of their tokens (idp-tokens.ts, with its own cache of verified tokens) and the portal's
// login through them. What the rest of keygate holds is this module's verifier and portal login,
// which always ask the generation in force: once a reload commits, a removed issuer's token is
// refused by the next request, the cached ones included (the new generation's cache starts empty),
// and a verification that was under way when the issuer was removed is refused as it ends.
// An issuer unchanged by a reload keeps its keys (no fetch); a new or changed one's keys are
// fetched before the swap, so its tokens are accepted as soon as the reload answers.
import { createHash } from 'node:crypto'
import { GatewayError } from '../errors.js'
import { changesByName, type Changes } from '../lib/changes.js'
import { createIdpVerifier, type IdpToken, type IdpVerifier, type KeySource } from './idp-tokens.js'
import type { IssuerKeys } from './issuer-keys.js'
import type { IssuerConfig } from './issuers.js'
import type { PortalLogin } from './portal-login.js'

/** what a reload changed, by issuer name */
export type IssuerChanges = Changes

/** A reload's issuers, their new keys fetched, not in force yet. */
export interface PreparedIssuers {
  readonly changes: IssuerChanges
  /** puts them in force, and closes the keys of the issuers no longer trusted */
  commit: () => void
  /** drops the keys prepare made (the reload was refused for another file) */
  discard: () => void
}

export interface IssuersInForce {
  readonly issuers: readonly IssuerConfig[]
  /** the keys of the issuers in force (readiness and metrics read them) */
  readonly keys: readonly IssuerKeys[]
  /** the tokens of the issuers in force: a removed issuer's are refused as soon as the reload commits */
  readonly verifier: IdpVerifier
  /** the portal's login through the issuers in force that have portalLogin; undefined without the portal */
  readonly portalLogin: PortalLogin | undefined
  prepare: (next: readonly IssuerConfig[]) => Promise<PreparedIssuers>
  close: () => void
}

export interface IssuersInForceOptions {
  /** an issuer's keys, made, not started */
  makeKeys: (issuer: IssuerConfig) => IssuerKeys
  /** the first fetch of a new issuer's keys: a failure is the caller's to log; its tokens then get 503 until they can be had */
  startKeys: (keys: IssuerKeys) => Promise<void>
  /** the portal's login through these issuers (idp/portal-login.ts); undefined: no portal */
  portalLoginOf?: (issuers: readonly IssuerConfig[], keysOf: (issuer: IssuerConfig) => KeySource, verifier: IdpVerifier) => PortalLogin
  /** the keys in force changed (metrics watch them) */
  onSwap?: (keys: readonly IssuerKeys[]) => void
  now?: () => number
  /** the ids and audiences of the protected resources that name an issuer (idp-tokens.ts createIdpVerifier) */
  resourceAudiences?: (issuer: IssuerConfig) => readonly string[]
}

interface Generation {
  issuers: readonly IssuerConfig[]
  keys: ReadonlyMap<IssuerConfig, IssuerKeys>
  verifier: IdpVerifier
  portalLogin: PortalLogin | undefined
}

/** A comparable form of an issuer's configuration: the client secret's hash stands for the secret. */
export function issuerFingerprint (issuer: IssuerConfig): string {
  const login = issuer.portalLogin
  return JSON.stringify({
    ...issuer,
    scopeMap: issuer.scopeMap === undefined ? null : [...issuer.scopeMap],
    portalLogin: login === undefined
      ? null
      : { ...login, clientSecret: createHash('sha256').update(login.clientSecret() ?? '').digest('hex') }
  })
}

const notTrusted = (issuer: IssuerConfig): GatewayError =>
  new GatewayError('INVALID_TOKEN', `The token's issuer ${issuer.name} is no longer trusted by keygate`, {
    headers: { 'www-authenticate': 'Bearer realm="keygate", error="invalid_token"' }
  })

export function createIssuersInForce (initial: readonly IssuerConfig[], options: IssuersInForceOptions): IssuersInForce {
  const generation = (issuers: readonly IssuerConfig[], keys: ReadonlyMap<IssuerConfig, IssuerKeys>): Generation => {
    const keysOf = (issuer: IssuerConfig): KeySource => keys.get(issuer) ?? { keyFor: async () => { throw notTrusted(issuer) } }
    const verifier = createIdpVerifier(issuers, keysOf, options.now, options.resourceAudiences)
    return { issuers, keys, verifier, portalLogin: options.portalLoginOf?.(issuers, keysOf, verifier) }
  }
  let current = generation(initial, new Map(initial.map((issuer) => [issuer, options.makeKeys(issuer)])))
  options.onSwap?.([...current.keys.values()])

  /** a token verified by an issuer that a reload removed (or changed) meanwhile is refused */
  const stillTrusted = (token: IdpToken): IdpToken => {
    if (!current.keys.has(token.issuer)) throw notTrusted(token.issuer)
    return token
  }
  const verifier: IdpVerifier = {
    cached: (token) => current.verifier.cached(token),
    issuerOf: (token) => current.verifier.issuerOf(token),
    verify (token, issuer) {
      if (!current.keys.has(issuer)) throw notTrusted(issuer)
      const verified = current.verifier.verify(token, issuer)
      return verified instanceof Promise ? verified.then(stillTrusted) : verified
    },
    get stats () { return current.verifier.stats }
  }
  const portalLogin: PortalLogin | undefined = options.portalLoginOf === undefined
    ? undefined
    : {
        providers: () => (current.portalLogin as PortalLogin).providers(),
        has: (name) => (current.portalLogin as PortalLogin).has(name),
        start: async (name, input) => await (current.portalLogin as PortalLogin).start(name, input),
        problem: async (err) => await (current.portalLogin as PortalLogin).problem(err),
        callback: async (query, binding) => await (current.portalLogin as PortalLogin).callback(query, binding),
        redeem: async (handoff, binding) => await (current.portalLogin as PortalLogin).redeem(handoff, binding)
      }

  return {
    get issuers () { return current.issuers },
    get keys () { return [...current.keys.values()] },
    verifier,
    portalLogin,
    async prepare (next) {
      const before = current
      const held = new Map(before.issuers.map((issuer) => [issuerFingerprint(issuer), issuer]))
      // an unchanged issuer stays the same object: its keys carry over, unfetched
      const issuers = next.map((issuer) => held.get(issuerFingerprint(issuer)) ?? issuer)
      const made = new Map(issuers.filter((issuer) => !before.keys.has(issuer)).map((issuer) => [issuer, options.makeKeys(issuer)]))
      await Promise.all([...made.values()].map(async (keys) => { await options.startKeys(keys) }))
      let settled = false
      return {
        changes: changesByName(before.issuers, issuers, (issuer) => issuer.name, issuerFingerprint),
        commit () {
          if (settled) return
          settled = true
          const keys = new Map(issuers.map((issuer) => [issuer, before.keys.get(issuer) ?? made.get(issuer) as IssuerKeys]))
          current = generation(issuers, keys)
          for (const [issuer, old] of before.keys) if (!keys.has(issuer)) old.close()
          options.onSwap?.([...keys.values()])
        },
        discard () {
          if (settled) return
          settled = true
          for (const keys of made.values()) keys.close()
        }
      }
    },
    close () {
      for (const keys of current.keys.values()) keys.close()
    }
  }
}
