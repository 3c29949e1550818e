// Trusted identity providers: the issuers whose access tokens keygate accepts beside its own
// (docs/identity-providers.md). Read from an issuers file (KEYGATE_ISSUERS: YAML or JSON, one
// schema, every mistake reported at once, like the route file) or, for one issuer, from
// KEYGATE_OIDC_ISSUER and KEYGATE_OIDC_AUDIENCE. Only asymmetric algorithms are ever accepted:
// `none` and HS* cannot be configured, so a token signed with an IdP's public key as an HMAC
// secret (algorithm confusion) has no algorithm to pass under. An issuer may also log users in to
// the developer portal (`portalLogin`, idp/portal-login.ts): keygate is then an OpenID client of
// it, whose secret (if any) is named by an environment variable, never written in the file.
import { basename } from 'node:path'
import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { readDocumentFile, schemaProblems } from '../config/document-file.js'
import { ConfigError, ISSUER_NAME, ISSUER_NAME_RULE } from '../config/env.js'
import { remoteUrlProblem } from '../remote-keys/key-set-fetch.js'
import { SCOPE_PATTERN, SCOPE_RULE } from '../users/scopes.js'

/** The JWS algorithms an issuer may use: asymmetric only (RFC 8725 §3.1, §3.2). */
export const IDP_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'EdDSA'] as const
export type IdpAlgorithm = typeof IDP_ALGORITHMS[number]
export const DEFAULT_IDP_ALGORITHMS: readonly IdpAlgorithm[] = ['RS256', 'PS256', 'ES256', 'EdDSA']
export const DEFAULT_CLOCK_SKEW_SECONDS = 60
export const MAX_CLOCK_SKEW_SECONDS = 300
/** keys.fetchTimeoutSeconds's bound: the longest a request may be made to wait for an IdP's keys */
export const MAX_FETCH_TIMEOUT_SECONDS = 30
/** a token longer than this is refused before it is parsed */
export const DEFAULT_MAX_TOKEN_BYTES = 8192

const ClaimPath = Type.String({
  pattern: '^[A-Za-z0-9_:-]+(\\.[A-Za-z0-9_:-]+)*$',
  maxLength: 200,
  description: 'a claim name, or a path of names joined by "."'
})

/** an environment variable's name (portalLogin.clientSecretEnv) */
const ENV_NAME = '^[A-Za-z_][A-Za-z0-9_]{0,127}$'
/** a scope as RFC 6749 §3.3 allows it: printable ASCII but space, " and \\ */
const OAUTH_SCOPE = '^[\\x21\\x23-\\x5B\\x5D-\\x7E]{1,256}$'
/** an authorization request parameter's name */
const PARAM_NAME = /^[A-Za-z0-9_.-]{1,64}$/
/**
 * What the login itself sends (and checks): an authorizationParams entry may not replace one.
 * (`request`, `request_uri`, `response_mode` would change how the answer comes back.)
 */
export const RESERVED_AUTHORIZATION_PARAMS: readonly string[] = [
  'response_type', 'client_id', 'redirect_uri', 'scope', 'state', 'nonce', 'code_challenge', 'code_challenge_method',
  'response_mode', 'request', 'request_uri', 'client_secret', 'code_verifier', 'grant_type', 'code'
]
/** authorizationParams also sent to the token endpoint: RFC 8707's resource is defined for both requests */
export const TOKEN_REQUEST_PARAMS: readonly string[] = ['resource']

const PortalLoginSchema = Type.Object({
  clientId: Type.String({ minLength: 1, maxLength: 256, description: 'keygate\'s client id at the issuer, 1 to 256 characters' }),
  clientSecretEnv: Type.Optional(Type.String({
    pattern: ENV_NAME,
    description: 'the NAME of the environment variable holding the client secret (letters, digits, _), never the secret itself'
  })),
  scopes: Type.Optional(Type.Array(Type.String({ pattern: OAUTH_SCOPE, description: 'a scope: printable ASCII without space, " or \\' }),
    { maxItems: 32, uniqueItems: true })),
  authorizationParams: Type.Optional(Type.Record(Type.String(), Type.String({ maxLength: 2048, description: 'a string of at most 2048 characters' }))),
  label: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: 'the button\'s text: 1 to 64 characters' })),
  redirectUri: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 }))
}, { additionalProperties: false })

const IssuerEntrySchema = Type.Object({
  name: Type.String({ pattern: `^${ISSUER_NAME}$`, description: ISSUER_NAME_RULE }),
  issuer: Type.String({ minLength: 1, maxLength: 2048, description: 'the `iss` its tokens carry, exactly' }),
  jwksUri: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
  discovery: Type.Optional(Type.Boolean()),
  audiences: Type.Array(Type.String({ minLength: 1, maxLength: 2048 }), { minItems: 1, maxItems: 16 }),
  algorithms: Type.Optional(Type.Array(Type.Union(IDP_ALGORITHMS.map((alg) => Type.Literal(alg))), { minItems: 1, uniqueItems: true })),
  clockSkewSeconds: Type.Optional(Type.Integer({ minimum: 0, maximum: MAX_CLOCK_SKEW_SECONDS })),
  requiredClaims: Type.Optional(Type.Array(ClaimPath, { maxItems: 16, uniqueItems: true })),
  accessTokenType: Type.Optional(Type.Union([Type.Literal('at+jwt'), Type.Literal('any')])),
  subjectClaim: Type.Optional(ClaimPath),
  maxTokenBytes: Type.Optional(Type.Integer({ minimum: 512, maximum: 65536 })),
  keys: Type.Optional(Type.Object({
    maxStaleSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 7 * 86400, description: 'how long keys serve through an outage of the IdP' })),
    unknownKidIntervalSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 3600 })),
    minRefreshSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 86400 })),
    maxRefreshSeconds: Type.Optional(Type.Integer({ minimum: 1, maximum: 7 * 86400 })),
    fetchTimeoutSeconds: Type.Optional(Type.Integer({
      minimum: 1,
      maximum: MAX_FETCH_TIMEOUT_SECONDS,
      description: 'the longest a request waits for the IdP\'s keys (discovery and JWKS fetch together); also each fetch\'s limit'
    }))
  }, { additionalProperties: false })),
  scopes: Type.Optional(Type.Object({
    claim: Type.Optional(ClaimPath),
    map: Type.Optional(Type.Record(Type.String({ minLength: 1, maxLength: 256 }), Type.Union([
      Type.String({ pattern: SCOPE_PATTERN }),
      Type.Array(Type.String({ pattern: SCOPE_PATTERN }), { maxItems: 64 })
    ])))
  }, { additionalProperties: false })),
  portalLogin: Type.Optional(PortalLoginSchema)
}, { additionalProperties: false })

const IssuersFileSchema = Type.Object({ issuers: Type.Array(IssuerEntrySchema, { maxItems: 32 }) }, { additionalProperties: false })
type IssuerEntry = Static<typeof IssuerEntrySchema>

/** One trusted issuer, every default filled in. */
export interface IssuerConfig {
  name: string
  issuer: string
  /** where its keys are: given, or read from `${issuer}/.well-known/openid-configuration` (discovery) */
  jwksUri: string | undefined
  audiences: readonly string[]
  algorithms: readonly IdpAlgorithm[]
  clockSkewSeconds: number
  /** claims every token must carry besides exp (always required), iss, aud and the subject claim */
  requiredClaims: readonly string[]
  /** `at+jwt`: the JOSE header's typ must be RFC 9068's (`at+jwt` or `application/at+jwt`) */
  accessTokenType: 'at+jwt' | 'any'
  subjectClaim: string
  maxTokenBytes: number
  /** where its scopes are: a claim path; undefined: `scope` (space-separated) or else `scp` (a list) */
  scopeClaim: string | undefined
  /** the IdP's scope (or role) -> keygate's scopes; undefined: taken as named (those that are valid scopes) */
  scopeMap: ReadonlyMap<string, readonly string[]> | undefined
  /** the key set's bounds (remote-keys/remote-key-set.ts), each in ms; undefined: its defaults */
  keys: { maxStaleMs?: number, unknownKidIntervalMs?: number, minRefreshMs?: number, maxRefreshMs?: number, timeoutMs?: number }
  /** the developer portal logs in through this issuer (idp/portal-login.ts); undefined: it does not */
  portalLogin: PortalLoginConfig | undefined
}

/** keygate as an OpenID client of the issuer, for the portal's login. */
export interface PortalLoginConfig {
  clientId: string
  /**
   * The client secret (client_secret_basic at the token endpoint), read from its environment
   * variable at startup; undefined: a public client (PKCE only). A function, so the secret is in
   * no JSON or log line the configuration may end up in.
   */
  clientSecret: () => string | undefined
  /** the variable it came from, for messages */
  clientSecretEnv: string | undefined
  /** asked beside `openid` (always asked, first) */
  scopes: readonly string[]
  /** sent on the authorization request; those of TOKEN_REQUEST_PARAMS on the token request too */
  authorizationParams: Readonly<Record<string, string>>
  /** the link's text: "Log in with <label>" */
  label: string
  /** undefined: `<origin of the request><portal prefix>/oidc/callback` */
  redirectUri: string | undefined
}

type Env = Readonly<Record<string, string | undefined>>

/** The portalLogin block, checked beyond its schema: the secret's variable set, no reserved parameter, a usable redirect URI. */
function toPortalLogin (entry: IssuerEntry, at: string, problems: string[], env: Env): PortalLoginConfig | undefined {
  const block = entry.portalLogin
  if (block === undefined) return undefined
  const where = `${at}.portalLogin`
  let secret: string | undefined
  if (block.clientSecretEnv !== undefined) {
    secret = env[block.clientSecretEnv]
    if (secret === undefined || secret === '') {
      problems.push(`${where}.clientSecretEnv: the environment variable ${block.clientSecretEnv} is not set: it must hold the client secret`)
    }
  }
  const params = block.authorizationParams ?? {}
  for (const name of Object.keys(params)) {
    if (!PARAM_NAME.test(name)) problems.push(`${where}.authorizationParams: ${JSON.stringify(name)} is not a parameter name (letters, digits, _ . -)`)
    else if (RESERVED_AUTHORIZATION_PARAMS.includes(name)) {
      problems.push(`${where}.authorizationParams.${name}: keygate sets ${name} itself; it cannot be configured`)
    }
  }
  if (Object.keys(params).length > 16) problems.push(`${where}.authorizationParams: at most 16 parameters`)
  if ((block.scopes ?? []).includes('openid')) problems.push(`${where}.scopes: openid is always asked; list only the others`)
  if (block.redirectUri !== undefined) {
    const problem = remoteUrlProblem(block.redirectUri)
    if (problem !== undefined) problems.push(`${where}.redirectUri: ${problem}`)
    else if (new URL(block.redirectUri).search !== '') problems.push(`${where}.redirectUri: must not have a query`)
  }
  const held = secret === '' ? undefined : secret
  return {
    clientId: block.clientId,
    clientSecret: () => held,
    clientSecretEnv: block.clientSecretEnv,
    scopes: block.scopes ?? [],
    authorizationParams: { ...params },
    label: block.label ?? entry.name,
    redirectUri: block.redirectUri
  }
}

/** An issuers file that cannot be used: every problem, each naming the file and the field. */
export class IssuersFileError extends ConfigError {
  readonly problems: string[]
  constructor (file: string, problems: string[]) {
    super(`${file}: ${problems.length === 1 ? problems[0] ?? '' : `${problems.length} problems:\n  - ${problems.join('\n  - ')}`}`)
    this.name = 'IssuersFileError'
    this.problems = problems
  }
}

function toIssuer (entry: IssuerEntry, at: string, problems: string[], env: Env): IssuerConfig {
  const issuerProblem = remoteUrlProblem(entry.issuer)
  if (issuerProblem !== undefined) problems.push(`${at}.issuer: ${issuerProblem}`)
  if (entry.jwksUri !== undefined) {
    const jwksProblem = remoteUrlProblem(entry.jwksUri)
    if (jwksProblem !== undefined) problems.push(`${at}.jwksUri: ${jwksProblem}`)
    if (entry.discovery === true) problems.push(`${at}: jwksUri and discovery: true both say where the keys are; give one`)
  } else if (entry.discovery === false) {
    problems.push(`${at}: with discovery: false, jwksUri must say where the issuer's keys are`)
  }
  const map = entry.scopes?.map
  return {
    name: entry.name,
    issuer: entry.issuer,
    jwksUri: entry.jwksUri,
    audiences: entry.audiences,
    algorithms: entry.algorithms ?? DEFAULT_IDP_ALGORITHMS,
    clockSkewSeconds: entry.clockSkewSeconds ?? DEFAULT_CLOCK_SKEW_SECONDS,
    requiredClaims: entry.requiredClaims ?? [],
    accessTokenType: entry.accessTokenType ?? 'any',
    subjectClaim: entry.subjectClaim ?? 'sub',
    maxTokenBytes: entry.maxTokenBytes ?? DEFAULT_MAX_TOKEN_BYTES,
    scopeClaim: entry.scopes?.claim,
    keys: Object.fromEntries(Object.entries({
      maxStaleMs: entry.keys?.maxStaleSeconds,
      unknownKidIntervalMs: entry.keys?.unknownKidIntervalSeconds,
      minRefreshMs: entry.keys?.minRefreshSeconds,
      maxRefreshMs: entry.keys?.maxRefreshSeconds,
      timeoutMs: entry.keys?.fetchTimeoutSeconds
    }).filter(([, v]) => v !== undefined).map(([k, v]) => [k, (v as number) * 1000])),
    scopeMap: map === undefined
      ? undefined
      : new Map(Object.entries(map).map(([from, to]) => [from, typeof to === 'string' ? [to] : to])),
    portalLogin: toPortalLogin(entry, at, problems, env)
  }
}

/** A parsed issuers document -> the issuers; IssuersFileError with every problem. */
export function issuersFromDocument (document: unknown, file: string, env: Env = process.env): IssuerConfig[] {
  const problems: string[] = []
  if (!Value.Check(IssuersFileSchema, document)) {
    throw new IssuersFileError(file, schemaProblems(IssuersFileSchema, document, (error) => error.schema.pattern === SCOPE_PATTERN ? ` (${SCOPE_RULE})` : ''))
  }
  const issuers = document.issuers.map((entry, i) => toIssuer(entry, `issuers[${i}]`, problems, env))
  const seen = new Map<string, number>()
  issuers.forEach((issuer, i) => {
    for (const [field, value] of [['name', issuer.name], ['issuer', issuer.issuer]] as const) {
      const key = `${field}\n${value}`
      const earlier = seen.get(key)
      if (earlier !== undefined) problems.push(`issuers[${i}].${field}: ${JSON.stringify(value)} is issuers[${earlier}]'s too; each issuer once`)
      else seen.set(key, i)
    }
  })
  if (problems.length > 0) throw new IssuersFileError(file, problems)
  return issuers
}

/** Reads and checks an issuers file (YAML or JSON); `env`: where portalLogin's clientSecretEnv is read. */
export async function loadIssuersFile (path: string, env: Env = process.env): Promise<IssuerConfig[]> {
  const document = await readDocumentFile(path, (where, problem) => new IssuersFileError(where, [problem]))
  return issuersFromDocument(document, basename(path), env)
}

/** What the configuration says of trusted issuers: a file, or one issuer from the environment, or none. */
export interface IssuerSettings {
  /** KEYGATE_ISSUERS */
  file: string | undefined
  /** KEYGATE_OIDC_ISSUER with KEYGATE_OIDC_AUDIENCE (and KEYGATE_OIDC_NAME, KEYGATE_OIDC_JWKS_URI) */
  single: IssuerConfig | undefined
}

const SINGLE_SECRET_ENV = 'KEYGATE_OIDC_PORTAL_CLIENT_SECRET'

/** The one issuer the KEYGATE_OIDC_* variables describe (config/env.ts reads them), checked as a file's would be. */
export function singleIssuer (values: {
  issuer: string
  audience: string
  name?: string | undefined
  jwksUri?: string | undefined
  /** KEYGATE_OIDC_PORTAL_CLIENT_ID, and KEYGATE_OIDC_PORTAL_CLIENT_SECRET's value (read by config/env.ts) */
  portalClientId?: string | undefined
  portalClientSecret?: (() => string | undefined) | undefined
}): IssuerConfig {
  const entry = {
    name: values.name ?? 'idp',
    issuer: values.issuer,
    audiences: values.audience.split(',').map((a) => a.trim()).filter((a) => a !== ''),
    ...(values.jwksUri !== undefined && { jwksUri: values.jwksUri }),
    ...(values.portalClientId !== undefined && {
      portalLogin: { clientId: values.portalClientId, ...(values.portalClientSecret !== undefined && { clientSecretEnv: SINGLE_SECRET_ENV }) }
    })
  }
  const secret = values.portalClientSecret?.()
  const [issuer] = issuersFromDocument({ issuers: [entry] }, 'KEYGATE_OIDC_*', secret === undefined ? {} : { [SINGLE_SECRET_ENV]: secret })
  return issuer as IssuerConfig
}

/** The issuers keygate trusts: the file's, or the single one, or none. */
export async function loadIssuers (settings: IssuerSettings): Promise<IssuerConfig[]> {
  if (settings.file !== undefined) return await loadIssuersFile(settings.file)
  return settings.single === undefined ? [] : [settings.single]
}
