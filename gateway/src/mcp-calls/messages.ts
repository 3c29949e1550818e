// One reading of an MCP POST body: the JSON-RPC messages it carries, read strictly
// (strict-json.ts) and checked against JSON-RPC 2.0 and MCP's framing, so that what keygate
// authorizes is what any upstream reads. A batch is refused outright from protocol version
// 2025-06-18 (which dropped batching); for older versions every element is judged, and one bad
// element refuses the whole batch. Keys that differ only in case (or by Unicode case folding)
// from a protocol key are refused on the message and its params: readers that match keys
// case-insensitively (Go's encoding/json) would take "Name" for "name".
import { GatewayError } from '../errors.js'
import { isObject, parseStrictJson, StrictJsonError, type JsonObject, type JsonValue } from './strict-json.js'

/** The version a request without MCP-Protocol-Version speaks (the MCP spec's rule for servers). */
export const DEFAULT_PROTOCOL_VERSION = '2025-03-26'
/** The first version without JSON-RPC batches. */
export const BATCHLESS_PROTOCOL_VERSION = '2025-06-18'

export interface McpMessage {
  /** a request (method and id), a notification (method, no id) or a response to the server (no method) */
  kind: 'request' | 'notification' | 'response'
  method?: string
  id?: string | number | null
  params?: JsonObject
}

/** Where the id of a single request is put as soon as it is known: a refusal carries it. */
export interface IdSink { id?: string | number }

const PROTOCOL_KEYS = ['jsonrpc', 'id', 'method', 'params', 'result', 'error', 'name', 'uri', 'arguments', '_meta', 'cursor',
  'protocolVersion', 'capabilities', 'clientInfo', 'progressToken', 'code', 'message', 'data', 'level', 'ref', 'argument', 'type']
/** Unicode case folding, near enough: "ſ" and "K" (Kelvin) fold as Go's reader folds them */
const fold = (key: string): string => key.normalize('NFKC').toUpperCase().toLowerCase()
const FOLDED = new Map(PROTOCOL_KEYS.map((key) => [fold(key), key]))
const REQUEST_MEMBERS = new Set(['jsonrpc', 'id', 'method', 'params'])
const RESPONSE_MEMBERS = new Set(['jsonrpc', 'id', 'result', 'error'])
/** the methods whose params name what is used: the name or URI must be there to be judged */
const NAMED_BY: ReadonlyMap<string, 'name' | 'uri'> = new Map([
  ['tools/call', 'name'], ['prompts/get', 'name'], ['resources/read', 'uri'], ['resources/subscribe', 'uri'], ['resources/unsubscribe', 'uri']
])
/** completion/complete's `ref`: what it names, by its type (the policy judges that prompt or resource too) */
const REF_NAMED_BY: ReadonlyMap<string, 'name' | 'uri'> = new Map([['ref/prompt', 'name'], ['ref/resource', 'uri']])

/**
 * Why a URI's text is not what a server that resolves it reads, or undefined: a dot segment ("."
 * or "..", also percent-encoded, between "/" or "\\"), or a percent-encoded unreserved character
 * (RFC 3986 §2.3: "%70" is "p"), or an encoded "/", "\\" or "%", or capitals in the scheme (or in
 * a DNS host), which a server reads whatever their case. The policy's globs judge the text, and
 * `file:///public/../private/keys` is under `file:///public/*` there, not to the server.
 */
const DNS_HOSTS = new Set(['http', 'https', 'ws', 'wss', 'file'])

function unresolved (uri: string): string | undefined {
  if (uri.replace(/%2e/gi, '.').split(/[/\\]/).some((segment) => segment === '.' || segment === '..')) return 'a "." or ".." segment'
  for (const [escape, hex] of uri.matchAll(/%([0-9a-fA-F]{2})/g)) {
    const char = String.fromCharCode(parseInt(hex as string, 16))
    if (/[A-Za-z0-9._~-]/.test(char)) return `${escape}, an unreserved character percent-encoded`
    // "/" and "\\" encoded hide a segment from the split above; "%" encoded, a second decoding's escapes
    if (char === '/' || char === '\\' || char === '%') return `${escape}, a "${char}" percent-encoded`
  }
  // RFC 3986 §6.2.2.1: a scheme is read whatever its case, and so is a host where it is a DNS name
  // (http, https, ws, wss, file; another scheme's authority may be case-sensitive); globs match text
  const parts = /^([^:/?#]*):(?:\/\/([^/?#]*))?/.exec(uri)
  if (parts === null) return undefined
  const scheme = parts[1] ?? ''
  if (/[A-Z]/.test(scheme)) return 'capitals in its scheme'
  if (DNS_HOSTS.has(scheme) && /[A-Z]/.test(parts[2] ?? '')) return 'capitals in its host'
  return undefined
}

function invalid (detail: string): GatewayError {
  return new GatewayError('MCP_INVALID_MESSAGE', detail)
}

function checkProtocolKeys (object: JsonObject, where: string): void {
  for (const key of Object.keys(object)) {
    const protocolKey = FOLDED.get(fold(key))
    if (protocolKey !== undefined && protocolKey !== key) {
      throw invalid(`${where} has the key ${JSON.stringify(key)}, which differs from the protocol key "${protocolKey}" only in case; send "${protocolKey}"`)
    }
  }
}

function isId (value: JsonValue | undefined): value is string | number {
  return typeof value === 'string' || (typeof value === 'number' && Number.isSafeInteger(value))
}

/** One JSON-RPC message, checked; its id goes to `sink` once it is known to be one. */
export function readMessage (value: JsonValue, where: string, sink?: IdSink): McpMessage {
  if (!isObject(value)) throw invalid(`${where} is not a JSON-RPC message (an object)`)
  checkProtocolKeys(value, where)
  if (value.jsonrpc !== '2.0') throw invalid(`${where} does not say "jsonrpc": "2.0"`)
  const id = value.id
  if (!('method' in value)) {
    // a response to a request of the server's: it asks nothing of the upstream, and passes
    for (const key of Object.keys(value)) if (!RESPONSE_MEMBERS.has(key)) throw invalid(`${where} has the member "${key}", which a JSON-RPC response has not`)
    if (!(isId(id) || id === null) || ('result' in value) === ('error' in value)) {
      throw invalid(`${where} is neither a request (it has no "method") nor a response (an "id" and one of "result" and "error")`)
    }
    return { kind: 'response', id }
  }
  for (const key of Object.keys(value)) if (!REQUEST_MEMBERS.has(key)) throw invalid(`${where} has the member "${key}", which a JSON-RPC request has not`)
  if ('id' in value && !isId(id)) throw invalid(`${where}'s "id" is not a string or an integer (MCP allows no other)`)
  if (isId(id) && sink !== undefined) sink.id = id
  const method = value.method
  if (typeof method !== 'string' || method === '') throw invalid(`${where}'s "method" is not a name`)
  const params = value.params
  if (params !== undefined && !isObject(params)) throw invalid(`${where}'s "params" is not an object`)
  if (params !== undefined) checkProtocolKeys(params, `${where}'s params`)
  const named = NAMED_BY.get(method)
  if (named !== undefined && typeof params?.[named] !== 'string') throw invalid(`${where} is ${method} without a string params.${named}`)
  const odd = named === 'uri' ? unresolved(params?.uri as string) : undefined
  if (odd !== undefined) throw invalid(`${where}'s params.uri has ${odd}, which keygate does not resolve to judge it; send the URI resolved`)
  if (method === 'completion/complete') checkRef(params?.ref, where)
  return { kind: isId(id) ? 'request' : 'notification', method, ...(isId(id) && { id }), ...(params !== undefined && { params }) }
}

/** completion/complete names a prompt or a resource (template) in `ref`, judged as prompts/get and resources/read judge theirs. */
function checkRef (ref: JsonValue | undefined, where: string): void {
  if (!isObject(ref)) throw invalid(`${where} is completion/complete without an object params.ref`)
  checkProtocolKeys(ref, `${where}'s params.ref`)
  const named = typeof ref.type === 'string' ? REF_NAMED_BY.get(ref.type) : undefined
  if (named === undefined) throw invalid(`${where}'s params.ref.type is neither "ref/prompt" nor "ref/resource"`)
  if (typeof ref[named] !== 'string') throw invalid(`${where}'s params.ref is ${String(ref.type)} without a string ${named}`)
  const odd = named === 'uri' ? unresolved(ref.uri as string) : undefined
  if (odd !== undefined) throw invalid(`${where}'s params.ref.uri has ${odd}, which keygate does not resolve to judge it; send the URI resolved`)
}

/** The version the request says it speaks; 400 for a value that is no version. */
export function protocolVersion (header: string | string[] | undefined): string {
  if (header === undefined) return DEFAULT_PROTOCOL_VERSION
  if (typeof header !== 'string' || !/^\d{4}-\d{2}-\d{2}$/.test(header)) {
    throw invalid('MCP-Protocol-Version is not one protocol version (YYYY-MM-DD)')
  }
  return header
}

/** The messages of a POST body, each checked, or the refusal of the whole body. */
export function readMcpBody (body: Uint8Array, version: string, sink?: IdSink): McpMessage[] {
  let value: JsonValue
  try {
    value = parseStrictJson(body)
  } catch (err) {
    if (err instanceof StrictJsonError) throw new GatewayError('MCP_PARSE_ERROR', `The body is not one strict JSON value: ${err.message}`)
    throw err
  }
  if (!Array.isArray(value)) return [readMessage(value, 'the message', sink)]
  if (version >= BATCHLESS_PROTOCOL_VERSION) {
    throw new GatewayError('MCP_BATCH_NOT_ALLOWED', `The body is a JSON-RPC batch, which MCP ${version} does not allow (batches ended with ` +
      `${BATCHLESS_PROTOCOL_VERSION}); send one message per request`)
  }
  if (value.length === 0) throw invalid('The body is an empty batch')
  return value.map((element, i) => readMessage(element, `batch element ${i}`))
}
