// RFC 9421 (HTTP Message Signatures) as keygate speaks it, in one place for both sides: the
// gateway verifies over the signature base built here and the client signs over the same. What
// this file holds is the serialising half (component identifiers, the Signature-Input value, the
// signature base, Content-Digest) and the component values of a request. Parsing received
// Structured Fields (RFC 9651) is the gateway's, with a maintained parser: the client only writes
// (but for the strict reading of a forwarded Content-Digest an upstream checks, ../forwarded-digest.ts).

/** The algorithms keygate accepts in `alg` (RFC 9421 §6.2.2), and which key type each needs. */
export const MESSAGE_SIGNATURE_ALGORITHMS = ['rsa-v1_5-sha256', 'rsa-pss-sha512', 'ed25519', 'ecdsa-p256-sha256'] as const
export type MessageSignatureAlgorithm = typeof MESSAGE_SIGNATURE_ALGORITHMS[number]

/** The public key types keygate registers. */
export const KEY_TYPES = ['rsa', 'ed25519', 'p256'] as const
export type KeyType = typeof KEY_TYPES[number]

/** The algorithms a key of each type may sign with; the first is used when `alg` is absent. */
export const ALGORITHMS_OF_KEY_TYPE: Readonly<Record<KeyType, readonly MessageSignatureAlgorithm[]>> = {
  rsa: ['rsa-v1_5-sha256', 'rsa-pss-sha512'],
  ed25519: ['ed25519'],
  p256: ['ecdsa-p256-sha256']
}

/** A bare item of a parameter, as keygate uses them: strings, integers and booleans (no tokens, decimals or byte sequences). */
export type ParameterValue = string | number | boolean
/** Parameters in their order: the order is part of the serialisation, hence of the signature base. */
export type Parameters = ReadonlyArray<readonly [name: string, value: ParameterValue]>

/** A covered component: a derived component ("@method") or a lowercase field name, and its parameters (";name=..."). */
export interface ComponentId {
  name: string
  params?: Parameters | undefined
}

const KEY = /^[a-z*][a-z0-9_\-.*]*$/
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/

/** Serialises an sf-string, sf-integer or sf-boolean (RFC 9651 §4.1). */
function serializeBareItem (value: ParameterValue): string {
  if (typeof value === 'boolean') return value ? '?1' : '?0'
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value) || Math.abs(value) > 999_999_999_999_999) throw new TypeError(`${value} is not a Structured Fields integer`)
    return String(value)
  }
  if (!PRINTABLE_ASCII.test(value)) throw new TypeError(`${JSON.stringify(value)} is not a Structured Fields string (printable ASCII only)`)
  return `"${value.replaceAll('\\', '\\\\').replaceAll('"', '\\"')}"`
}

/** ;name=value... in order (a true boolean is the bare name, RFC 9651 §4.1.1.2). */
export function serializeParameters (params: Parameters | undefined): string {
  let text = ''
  for (const [name, value] of params ?? []) {
    if (!KEY.test(name)) throw new TypeError(`${JSON.stringify(name)} is not a Structured Fields key`)
    text += value === true ? `;${name}` : `;${name}=${serializeBareItem(value)}`
  }
  return text
}

/** "name";params: a component identifier as it appears in Signature-Input and the signature base. */
export function serializeComponentId (component: ComponentId): string {
  return serializeBareItem(component.name) + serializeParameters(component.params)
}

/**
 * The first covered component listed twice, serialised with its parameters ("@path", or
 * "content-type";sf): RFC 9421 §2 forbids repeating an identifier, since each is one line of the
 * signature base and a verifier could read one and a signer mean the other. Undefined when none is.
 */
export function repeatedComponent (components: readonly ComponentId[]): string | undefined {
  const seen = new Set<string>()
  for (const component of components) {
    const id = serializeComponentId(component)
    if (seen.has(id)) return id
    seen.add(id)
  }
  return undefined
}

/** ("@method" "@path");created=...;keyid="...": one signature's Signature-Input member value and @signature-params. */
export function serializeSignatureParams (components: readonly ComponentId[], params: Parameters): string {
  const repeated = repeatedComponent(components)
  if (repeated !== undefined) throw new TypeError(`the covered component ${repeated} is listed twice; RFC 9421 allows each once`)
  return `(${components.map(serializeComponentId).join(' ')})${serializeParameters(params)}`
}

/**
 * The signature base (RFC 9421 §2.5): one line per covered component, `"id": value`, then the
 * `"@signature-params"` line, joined by LF with no trailing newline. A value holding a line break
 * could forge a line of its own: refused.
 */
export function signatureBase (lines: ReadonlyArray<readonly [ComponentId, string]>, signatureParams: string): string {
  let base = ''
  for (const [component, value] of lines) {
    if (value.includes('\n') || value.includes('\r')) throw new TypeError(`the value of ${serializeComponentId(component)} holds a line break`)
    base += `${serializeComponentId(component)}: ${value}\n`
  }
  return base + `"@signature-params": ${signatureParams}`
}

/** The digest algorithms of Content-Digest (RFC 9530) keygate computes and checks. */
export const CONTENT_DIGEST_ALGORITHMS = ['sha-256', 'sha-512'] as const
/**
 * Decision mode: the header of keygate's allowed answer (which the proxy sets on the upstream
 * request, over any copy the client sent) naming the Content-Digest a verified signature covers,
 * for an upstream to check the body keygate was not shown against.
 */
export const FORWARDED_DIGEST_HEADER = 'x-keygate-content-digest'
export type ContentDigestAlgorithm = typeof CONTENT_DIGEST_ALGORITHMS[number]

/** The Content-Digest field value for one digest: `sha-256=:<base64>:`. */
export function contentDigestValue (algorithm: ContentDigestAlgorithm, digestBase64: string): string {
  return `${algorithm}=:${digestBase64}:`
}

/** What a request's component values are read from; every string as received (raw target, field lines). */
export interface SignedMessage {
  method: string
  /** the origin-form request target as sent: "/path" or "/path?query" */
  target: string
  /** lowercase scheme, "https" or "http" */
  scheme: string
  /** the authority the client addressed (Host), as sent */
  authority: string
  /** the field lines of a lowercase field name, in order; undefined when the field is absent */
  field: (name: string) => readonly string[] | undefined
}

/** A component the request cannot supply (absent field, unsupported parameter): the signature cannot verify. */
export class ComponentError extends Error {
  readonly component: string
  constructor (component: string, message: string) {
    super(message)
    this.name = 'ComponentError'
    this.component = component
  }
}

const DEFAULT_PORTS: Readonly<Record<string, string>> = { http: '80', https: '443' }

/** host[:port], lowercase, without the scheme's default port (RFC 9421 §2.2.3). */
export function normaliseAuthority (authority: string, scheme: string): string {
  const lower = authority.toLowerCase()
  const port = DEFAULT_PORTS[scheme.toLowerCase()]
  return port !== undefined && lower.endsWith(`:${port}`) && !lower.endsWith(']') ? lower.slice(0, -port.length - 1) : lower
}

function splitTarget (target: string): { path: string; query: string | undefined } {
  const at = target.indexOf('?')
  return at === -1 ? { path: target, query: undefined } : { path: target.slice(0, at), query: target.slice(at + 1) }
}

/**
 * The value of @query-param;name=... (RFC 9421 §2.2.8): the query parsed as
 * application/x-www-form-urlencoded, names and values re-encoded with percent-encoding.
 */
function queryParam (query: string | undefined, name: string): string {
  const id = `"@query-param";name=${serializeBareItem(name)}`
  const values: string[] = []
  const decode = (text: string): string => {
    try {
      return decodeURIComponent(text.replaceAll('+', ' '))
    } catch {
      throw new ComponentError(id, 'the query percent-encodes bytes that are not UTF-8')
    }
  }
  for (const pair of (query ?? '').split('&')) {
    if (pair === '') continue
    const eq = pair.indexOf('=')
    const key = decode(eq === -1 ? pair : pair.slice(0, eq))
    if (key === name) values.push(encodeURIComponent(decode(eq === -1 ? '' : pair.slice(eq + 1))))
  }
  if (values.length === 0) throw new ComponentError(id, `the query has no parameter ${JSON.stringify(name)}`)
  if (values.length > 1) throw new ComponentError(id, `the query has the parameter ${JSON.stringify(name)} more than once: it cannot be signed`)
  return values[0] as string
}

const FIELD_PARAMS = new Set<string>()
/** optional whitespace (SP, HTAB) around a field line value */
const OWS_AROUND = /^[ \t]+|[ \t]+$/g
const QUERY_PARAM_PARAMS = new Set(['name'])

/**
 * The value of one covered component of a request (RFC 9421 §2.1, §2.2). Supported: @method,
 * @target-uri, @authority, @scheme, @request-target, @path, @query, @query-param;name, and header
 * fields without parameters (their field lines trimmed and joined with ", ").
 */
export function requestComponentValue (message: SignedMessage, component: ComponentId): string {
  const id = serializeComponentId(component)
  const allowed = component.name === '@query-param' ? QUERY_PARAM_PARAMS : FIELD_PARAMS
  const unsupported = (component.params ?? []).find(([name]) => !allowed.has(name))
  if (unsupported !== undefined) throw new ComponentError(id, `the component parameter ;${unsupported[0]} is not supported by keygate`)
  const { path, query } = splitTarget(message.target)
  switch (component.name) {
    case '@method': return message.method
    case '@target-uri': return `${message.scheme.toLowerCase()}://${normaliseAuthority(message.authority, message.scheme)}${message.target}`
    case '@authority': return normaliseAuthority(message.authority, message.scheme)
    case '@scheme': return message.scheme.toLowerCase()
    case '@request-target': return message.target
    case '@path': return path === '' ? '/' : path
    case '@query': return `?${query ?? ''}`
    case '@query-param': {
      const name = component.params?.find(([key]) => key === 'name')?.[1]
      if (typeof name !== 'string') throw new ComponentError(id, '@query-param needs a string ;name parameter')
      return queryParam(query, name)
    }
  }
  if (component.name.startsWith('@')) throw new ComponentError(id, `${component.name} is not a request component keygate knows`)
  if (component.name !== component.name.toLowerCase()) throw new ComponentError(id, `field names are covered in lowercase: ${component.name.toLowerCase()}`)
  const lines = message.field(component.name)
  if (lines === undefined) throw new ComponentError(id, `the request has no ${component.name} field`)
  return lines.map((line) => line.replace(OWS_AROUND, '')).join(', ')
}
