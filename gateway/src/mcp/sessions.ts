// MCP sessions belong to who opened them (docs/mcp.md, "Sessions"). On an MCP route, the session
// id an upstream issues (its `Mcp-Session-Id` answer header, on the answer to initialize) is bound,
// in the store, to the identity whose request it answered, before the answer reaches the client;
// a request naming a session passes only for that identity: an unknown id, or another identity's,
// is refused before the upstream (404, the spec's "session not found", as a JSON-RPC error). The
// owner's DELETE passes, and once the upstream accepts it the binding is forgotten. The store is
// shared by every gateway on one Redis, so a session opened through one gateway is its owner's
// on all. There is no in-process cache: one store command per request in a session (a GETEX that
// also renews the session's lifetime), and a session ended on one gateway is refused on all at once.
// When the store does not answer, the check fails closed (503 STORE_UNAVAILABLE), whatever the
// route's onStoreDown (which is about counting, not about who may act).
import type { IncomingHttpHeaders } from 'node:http'
import type { AuthState } from '../auth/stage.js'
import { GatewayError } from '../errors.js'
import type { BeforeAnswer } from '../proxy/forwarder.js'
import type { RouteConfig } from '../proxy/route.js'
import type { McpSessionStore } from '../store/types.js'

export const MCP_SESSION_HEADER = 'mcp-session-id'
/** A session id is at most this long: ids are the client's (or the upstream's) input, and a store key */
export const MAX_SESSION_ID_LENGTH = 256
/** the spec: visible ASCII only (0x21 to 0x7E) */
const SESSION_ID = new RegExp(`^[\\x21-\\x7E]{1,${MAX_SESSION_ID_LENGTH}}$`)

/**
 * Who a session belongs to: the user (a keygate user, an IdP's `<issuer>:<subject>`, the owner of
 * a signed request's key: one user's keys share its sessions); on an agent route, the signed
 * agent's origin; on a public route nobody, so every caller is one identity there.
 */
export function sessionOwner (auth: AuthState | null): string {
  if (auth?.user !== undefined) return `user:${auth.user}`
  if (auth?.agent !== undefined) return `agent:${auth.agent.origin}`
  return 'public'
}

export function sessionNotFound (detail: string): GatewayError {
  // on an MCP route every refusal is a JSON-RPC error (mcp-calls/json-rpc-error.ts): -32001, as MCP servers answer an unknown session
  return new GatewayError('MCP_SESSION_NOT_FOUND', detail)
}

/** The session a request names: undefined when none; refused when it cannot be a session id. */
export function requestedSession (headers: IncomingHttpHeaders): string | undefined {
  const value = headers[MCP_SESSION_HEADER]
  if (value === undefined) return undefined
  // Node joins a repeated header with ", ": a space, which no session id holds
  if (typeof value !== 'string' || !SESSION_ID.test(value)) {
    throw sessionNotFound(`Mcp-Session-Id must be 1 to ${MAX_SESSION_ID_LENGTH} visible ASCII characters, sent once`)
  }
  return value
}

/**
 * Before the upstream: a request on an MCP route that names a session passes only for the
 * session's owner. Undefined (nothing to wait for) when the route is not MCP or no session is named.
 */
export function checkSession (store: McpSessionStore, route: RouteConfig, auth: AuthState | null, headers: IncomingHttpHeaders): Promise<void> | undefined {
  if (route.mcp === undefined) return undefined
  const id = requestedSession(headers)
  if (id === undefined) return undefined
  const owner = sessionOwner(auth)
  return store.mcpSessionOwner(id, route.mcp.sessions.ttlSeconds * 1000).then((held) => {
    // one answer for both: another identity learns nothing about whether the id exists
    if (held !== owner) throw sessionNotFound('The session is unknown, ended or expired, or was opened by another identity')
  })
}

/** What the answer hook needs to know of the request it answers. */
export interface SessionRequest {
  method: string
  /** the session the request named (checked: its owner's) */
  session: string | undefined
  auth: AuthState | null
}

/**
 * After the upstream answered, before the client sees it: a new session id in the answer is bound
 * to the requester (an id already bound to another identity is not handed out: 502); the owner's
 * DELETE of a session that the upstream accepted (2xx) forgets it. Undefined when there is nothing to do.
 */
export function sessionAnswer (
  store: McpSessionStore, route: RouteConfig, request: SessionRequest, status: number, answer: Readonly<Record<string, string | string[]>>
): Promise<void> | undefined {
  if (route.mcp === undefined) return undefined
  const ttl = route.mcp.sessions.ttlSeconds * 1000
  if (request.method === 'DELETE' && request.session !== undefined && status >= 200 && status < 300) {
    return store.forgetMcpSession(request.session)
  }
  const issued = answer[MCP_SESSION_HEADER]
  if (typeof issued !== 'string' || issued === request.session || status >= 300 || !SESSION_ID.test(issued)) return undefined
  const owner = sessionOwner(request.auth)
  return store.bindMcpSession(issued, owner, ttl).then((held) => {
    if (held !== owner) throw new GatewayError('UPSTREAM_UNAVAILABLE', 'The upstream issued a session id that another identity holds; it is not handed out')
  })
}

/** sessionAnswer for the forwarder (proxy/forwarder.ts: BeforeAnswer), for one request. */
export function sessionAnswerHook (store: McpSessionStore, route: RouteConfig, request: SessionRequest): BeforeAnswer {
  return (status, answer) => sessionAnswer(store, route, request, status, answer)
}
