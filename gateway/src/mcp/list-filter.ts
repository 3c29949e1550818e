// Lists show what may be called (docs/mcp.md, "Lists show what may be called"). On an MCP route,
// the answer to a `tools/list`, `resources/list`, `resources/templates/list` or `prompts/list`
// reaches the client without the entries the caller may not use: a tool or prompt by its `name`,
// a resource by its `uri`, judged by the one rule that refuses calls (mcp-calls/policy.ts:
// mayUse); a resource template is shown only when every URI beginning with its literal text
// (before its first `{`) is one the caller may read (mayUseAllUnder), since it can expand to any
// of them. A list's response is found by the JSON-RPC id of the list request, and by its result's
// shape anywhere else (a response to another request, in any answer of the route: a server can be
// made to send a list's response on another request's stream, as the MCP SDK's does for a reused
// id); everything else in the answer (other responses, notifications, the result's other members:
// nextCursor, _meta) passes as it came. An answer to a POST that asked for no list is read only
// where a cheap look at its bytes finds a possible list (mcp/list-needle.ts). An `application/json` answer is read whole, up to MAX_LIST_ANSWER_BYTES, and
// sent rewritten; a `text/event-stream` answer is rewritten event by event (mcp/sse-filter.ts).
// What keygate cannot read as the list's response is not passed: 502 MCP_LIST_UNFILTERABLE (a
// JSON-RPC error carrying the list's id, in an event stream). A GET stream (the server's own
// stream, and a stream resumed with Last-Event-ID, which replays a POST's responses) is read the
// same way, a response being judged by its result's shape, since keygate does not know its request.
import type { AuthState } from '../auth/stage.js'
import { GatewayError } from '../errors.js'
import { mediaTypeOf } from '../lib/http-headers.js'
import { jsonRpcError } from '../mcp-calls/json-rpc-error.js'
import type { McpMessage } from '../mcp-calls/messages.js'
import { mayUse, mayUseAllUnder, type McpPolicy, type NamedKind } from '../mcp-calls/policy.js'
import { isObject, parseStrictJson, StrictJsonError, type JsonValue } from '../mcp-calls/strict-json.js'
import type { AnswerBody, RewriteAnswer } from '../proxy/forwarder.js'
import { JsonAnswerGuard, mayHoldList } from './list-needle.js'
import { SseEventFilter } from './sse-filter.js'

/** A JSON list answer is read whole up to this many bytes; a larger one is refused (502 MCP_LIST_UNFILTERABLE). */
export const MAX_LIST_ANSWER_BYTES = 4 * 1024 * 1024

/** A list method: the member of its result that holds the entries, what they are judged as, and by which key. */
interface ListKind { method: string, member: string, kind: NamedKind, key: 'name' | 'uri' | 'uriTemplate' }

const LIST_KINDS: readonly ListKind[] = [
  { method: 'tools/list', member: 'tools', kind: 'tools', key: 'name' },
  { method: 'prompts/list', member: 'prompts', kind: 'prompts', key: 'name' },
  { method: 'resources/list', member: 'resources', kind: 'resources', key: 'uri' },
  { method: 'resources/templates/list', member: 'resourceTemplates', kind: 'resources', key: 'uriTemplate' }
]
const BY_METHOD = new Map(LIST_KINDS.map((list) => [list.method, list]))

/** as messages.ts folds keys: a "Tools" or "NAME" beside "tools" or "name" is what a case-blind reader would take */
const fold = (key: string): string => key.normalize('NFKC').toUpperCase().toLowerCase()
const MEMBERS = new Map(LIST_KINDS.map((list) => [fold(list.member), list.member]))
const RESPONSE_KEYS = new Map(['jsonrpc', 'id', 'result', 'error', 'method'].map((key) => [fold(key), key]))

type Id = string | number

export function unfilterable (detail: string): GatewayError {
  return new GatewayError('MCP_LIST_UNFILTERABLE', detail)
}

/** What one answer is filtered for: the caller's scopes, the route's policy, and the lists asked for by id (undefined: by their result's shape). */
export class ListFilter {
  readonly policy: McpPolicy
  readonly granted: ReadonlySet<string>
  /** each list request's id and its list; undefined on a GET stream: any response with a list's member is filtered */
  readonly lists: ReadonlyMap<Id, ListKind[]> | undefined
  /** the list requests whose responses have passed (filtered, or an error) */
  readonly #answered = new Set<Id>()
  /** the requests an answer cut short answers with an error: the lists asked for, or those of a POST that asked for none */
  readonly #waiting: readonly Id[]
  /** a message is read only when its text may hold a list (list-needle.ts): a POST that asked for none */
  readonly #needle: boolean

  constructor (policy: McpPolicy, granted: ReadonlySet<string>, lists: ReadonlyMap<Id, ListKind[]> | undefined,
    other?: { requests: readonly Id[] }) {
    this.policy = policy
    this.granted = granted
    this.lists = lists
    this.#waiting = lists === undefined ? other?.requests ?? [] : [...lists.keys()]
    this.#needle = other !== undefined
  }

  /** a GET stream's events are read only when MCP clients read them as messages (type `message` or none): the legacy transport's `endpoint` passes */
  get onlyMessages (): boolean {
    return this.lists === undefined
  }

  /** The ids of the requests waiting (ListFilter's #waiting) not answered yet (a JSON-RPC error answers each). */
  ids (): Id[] {
    return this.#waiting.filter((id) => !this.#answered.has(id))
  }

  #visible (list: ListKind, entry: JsonValue): boolean {
    if (!isObject(entry)) return false
    // an entry with a case variant of its key ("Name" beside "name") could read as another to a case-blind client: hidden
    for (const key of Object.keys(entry)) if (key !== list.key && fold(key) === fold(list.key)) return false
    const value = entry[list.key]
    if (typeof value !== 'string') return false
    if (list.key !== 'uriTemplate') return mayUse(this.policy, list.kind, value, this.granted)
    const brace = value.indexOf('{')
    return mayUseAllUnder(this.policy, list.kind, brace < 0 ? value : value.slice(0, brace), this.granted)
  }

  /**
   * One JSON-RPC message of the answer, filtered when it is a list's response (the same object,
   * its list members replaced), as it came otherwise; MCP_LIST_UNFILTERABLE when it is a list's
   * response that cannot be read as one.
   */
  message (message: JsonValue): { value: JsonValue, changed: boolean } {
    if (!isObject(message)) return { value: message, changed: false }
    for (const key of Object.keys(message)) {
      const protocolKey = RESPONSE_KEYS.get(fold(key))
      if (protocolKey !== undefined && protocolKey !== key) {
        throw unfilterable(`A message of the upstream's answer has the key ${JSON.stringify(key)}, a case variant of "${protocolKey}"`)
      }
    }
    // a response: what has a result or an error, whatever else it has
    if (!('result' in message) && !('error' in message)) return { value: message, changed: false }
    const [listId, listed] = this.#asked(message.id)
    // a response to no list asked for: judged by its result's shape
    const byShape = listed === undefined
    const asked = listed ?? LIST_KINDS
    const id = listId ?? (typeof message.id === 'string' || typeof message.id === 'number' ? message.id : undefined)
    if ('error' in message && !('result' in message)) {
      if (id !== undefined) this.#answered.add(id)
      return { value: message, changed: false }
    }
    const result = message.result
    if (!isObject(result) && byShape) return { value: message, changed: false }
    if (!isObject(result) || ('error' in message && !byShape)) {
      throw unfilterable(`The upstream's answer to the list request ${JSON.stringify(id)} has not one result object`)
    }
    for (const key of Object.keys(result)) {
      const member = MEMBERS.get(fold(key))
      if (member !== undefined && member !== key) throw unfilterable(`The upstream's list answer has the member ${JSON.stringify(key)} beside "${member}"`)
    }
    let found = false
    for (const list of asked) {
      const entries = result[list.member]
      if (entries === undefined) continue
      if (!Array.isArray(entries)) throw unfilterable(`The upstream's list answer's "${list.member}" is not an array`)
      result[list.member] = entries.filter((entry) => this.#visible(list, entry))
      found = true
    }
    if (!found && !byShape) {
      throw unfilterable(`The upstream's answer to the list request ${JSON.stringify(id)} has no ${asked.map((list) => `"${list.member}"`).join(' or ')}`)
    }
    if (id !== undefined) this.#answered.add(id)
    return { value: message, changed: found }
  }

  /**
   * The list request a response's id answers, as a client may read it: exactly, or as the MCP
   * SDK's client reads a response's id, Number(id) (the string "1", or " 1", answers the request 1).
   */
  #asked (id: JsonValue | undefined): [Id, readonly ListKind[]] | [undefined, undefined] {
    const lists = this.lists
    if (lists === undefined || (typeof id !== 'string' && typeof id !== 'number')) return [undefined, undefined]
    const exact = lists.get(id)
    if (exact !== undefined) return [id, exact]
    const loose = typeof id === 'string' ? Number(id) : String(id)
    const found = lists.get(loose)
    return found === undefined ? [undefined, undefined] : [loose, found]
  }

  /**
   * One answer's JSON-RPC text (a message, or a batch's array of them): the same text when it
   * holds no list's response, else the rewritten text. MCP_LIST_UNFILTERABLE when it is no
   * strict JSON value, or a list's response in it cannot be read as one.
   */
  text (bytes: Uint8Array): Uint8Array | string {
    if (this.#needle && !mayHoldList(bytes)) return bytes
    let value: JsonValue
    try {
      value = parseStrictJson(bytes)
    } catch (err) {
      if (err instanceof StrictJsonError) throw unfilterable(`The upstream's answer, which may hold a list, is not one strict JSON value: ${err.message}`)
      throw err
    }
    if (!Array.isArray(value) && !isObject(value)) throw unfilterable('The upstream\'s answer, which may hold a list, is not a JSON-RPC message')
    let changed = false
    if (Array.isArray(value)) {
      for (const [i, element] of value.entries()) {
        const filtered = this.message(element)
        value[i] = filtered.value
        changed ||= filtered.changed
      }
    } else {
      changed = this.message(value).changed
    }
    return changed ? JSON.stringify(value) : bytes
  }

  /** The answer cut short: for each list asked for and not answered yet, a JSON-RPC error carrying its id, as `error`. */
  errors (error: GatewayError): string[] {
    return this.ids().map((id) => jsonRpcError(error, id))
  }
}

/** The list requests among a request's messages, by id; undefined when there is none. */
export function listRequests (messages: readonly McpMessage[]): Map<Id, ListKind[]> | undefined {
  let lists: Map<Id, ListKind[]> | undefined
  for (const message of messages) {
    const list = message.method === undefined ? undefined : BY_METHOD.get(message.method)
    if (list === undefined || message.kind !== 'request' || message.id === undefined || message.id === null) continue
    lists ??= new Map()
    // one id for two lists (a client's mistake): its response is filtered for each, and must hold one of them
    const known = lists.get(message.id)
    if (known === undefined) lists.set(message.id, [list])
    else known.push(list)
  }
  return lists
}

/** A JSON answer to a list request, read whole (up to MAX_LIST_ANSWER_BYTES) and rewritten. */
function jsonAnswer (filter: ListFilter): Extract<AnswerBody, { whole: unknown }> {
  return {
    max: MAX_LIST_ANSWER_BYTES,
    tooLarge: () => unfilterable(`The upstream's answer to a list request is over ${MAX_LIST_ANSWER_BYTES} bytes, the most keygate reads to filter a list`),
    whole: (body) => {
      try {
        const text = filter.text(body)
        return typeof text === 'string' ? Buffer.from(text) : body
      } catch (err) {
        return err instanceof Error ? err : new Error(String(err))
      }
    }
  }
}

/**
 * A JSON answer to a POST that asked for no list: whole when its declared length is within
 * MAX_LIST_ANSWER_BYTES (it keeps a Content-Length), else held and streamed (list-needle.ts).
 */
function otherJsonAnswer (filter: ListFilter, headers: Readonly<Record<string, string | string[]>>): AnswerBody {
  const declared = headers['content-length']
  const length = typeof declared === 'string' && /^\d+$/.test(declared) ? Number(declared) : Infinity
  const whole = jsonAnswer(filter)
  if (length <= MAX_LIST_ANSWER_BYTES) return whole
  const judge = { text: (bytes: Uint8Array) => filter.text(bytes), tooLarge: whole.tooLarge }
  if (length !== Infinity) return { stream: () => new JsonAnswerGuard(judge, MAX_LIST_ANSWER_BYTES) }
  // of unknown length (chunked, as MCP servers answer): collected as one buffer (no stream per answer), and only
  // past MAX_LIST_ANSWER_BYTES streamed through the guard, which then judges every byte it is given
  return { ...whole, overflow: () => new JsonAnswerGuard(judge, 0) }
}

/**
 * The forwarder's rewriting of an MCP route's answer (proxy/forwarder.ts: RewriteAnswer), or
 * undefined when the route is not MCP or the answer can hold no list: a GET's error or a DELETE
 * whose answer is no event stream (a GET that asked for an event stream and has a 2xx with a body
 * that is none is refused: MCP clients read it as one), a POST's answer in a media type MCP
 * clients do not read. Every POST's JSON or event-stream answer is read, whatever it asked for (a
 * list's response can come on another request's answer): one that asked for no list only where
 * its bytes may hold one (list-needle.ts). Where it is defined, the request asks the upstream for
 * an answer without Content-Encoding (`Accept-Encoding: identity`, proxy.ts): keygate reads no
 * compressed answer, and refuses one that comes all the same.
 */
export function listAnswerHook (policy: McpPolicy | undefined, method: string, auth: AuthState | null,
  accept?: string | string[]): RewriteAnswer | undefined {
  if (policy === undefined) return undefined
  const messages = auth?.mcpMessages ?? []
  const lists = method === 'POST' ? listRequests(messages) : undefined
  // a POST that asked for no list: its answer read where it may hold one, and cut short, an error for each of its requests
  const other = method === 'POST' && lists === undefined
    ? { requests: messages.flatMap((m) => m.kind === 'request' && (typeof m.id === 'string' || typeof m.id === 'number') ? [m.id] : []) }
    : undefined
  const filter = new ListFilter(policy, auth?.scopes?.set ?? new Set(), lists, other)
  const asksStream = method === 'GET' && String(accept ?? '').toLowerCase().includes('text/event-stream')
  return (status, headers) => {
    if (status === 204 || status === 304) return undefined
    const type = mediaTypeOf(headers['content-type'])
    const readable = type === 'text/event-stream' || (method === 'POST' && type === 'application/json')
    const encoding = headers['content-encoding']
    const encoded = encoding !== undefined && encoding !== 'identity'
    if (readable && !encoded) {
      if (type === 'text/event-stream') return { stream: () => new SseEventFilter(filter) }
      return other === undefined ? jsonAnswer(filter) : otherJsonAnswer(filter, headers)
    }
    const success = status >= 200 && status < 300
    // a POST that asked for no list: only an answer MCP clients read (they undo a Content-Encoding) is refused, when it has a body
    if (other !== undefined) {
      if (!readable) return undefined
      const refusedEncoded = (): GatewayError =>
        unfilterable(`The upstream answered with Content-Encoding ${JSON.stringify(String(encoding))}, which keygate cannot read to filter a list`)
      return { max: 0, tooLarge: refusedEncoded, whole: (body) => body.length === 0 ? body : refusedEncoded() }
    }
    // a GET stream's 2xx is read as events by MCP clients whatever its Content-Type says (the SDK's is): only an empty one passes unread
    const unreadStream = asksStream && success && !readable
    // a GET's other answers; a POST's error, or 202, carries no list
    if (!readable && !unreadStream && (method !== 'POST' || !success || status === 202)) return undefined
    // a list answer in a form keygate cannot read is not passed
    const form = `${JSON.stringify(type)}${encoded ? ` with Content-Encoding ${JSON.stringify(String(encoding))}` : ''}`
    const refused = (): GatewayError => unfilterable(`The upstream answered as ${form}, which keygate cannot read to filter a list`)
    return { max: 0, tooLarge: refused, whole: unreadStream ? (body) => body.length === 0 ? body : refused() : refused }
  }
}
