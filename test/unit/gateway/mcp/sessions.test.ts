// The session rules of an MCP route (mcp/sessions.ts) over the embedded store, and over a store
// that does not answer: who owns a session, what is refused, what is bound and forgotten on the
// upstream's answer, and that the check fails closed when the store is away.
import t from 'tap'
import { GatewayError } from '../../../../gateway/src/errors.js'
import { compilePolicy } from '../../../../gateway/src/mcp-calls/policy.js'
import { checkSession, requestedSession, sessionAnswer, sessionOwner } from '../../../../gateway/src/mcp/sessions.js'
import { route, type RouteConfig } from '../../../../gateway/src/proxy/route.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import type { Store } from '../../../../gateway/src/store/index.js'

const defaults = { bodyLimit: 1024, timeoutMs: 1000 }
const mcpRoute: RouteConfig = route({ prefix: '/mcp', upstream: 'http://127.0.0.1:1', auth: 'bearer', mcp: compilePolicy({ sessions: { ttlSeconds: 3600 } }) }, defaults)
const plainRoute: RouteConfig = route({ prefix: '/plain', upstream: 'http://127.0.0.1:1', auth: 'bearer' }, defaults)
const alice = { user: 'alice' }
const bob = { user: 'bob' }

const codeOf = async (pending: Promise<void> | undefined): Promise<string | undefined> => {
  try {
    await pending
    return undefined
  } catch (err) {
    return (err as GatewayError).code
  }
}

t.test('owners: the user, else the signed agent, else nobody (public)', async (t) => {
  t.equal(sessionOwner({ user: 'testidp:123' }), 'user:testidp:123')
  t.equal(sessionOwner({ agent: { origin: 'https://agent.example', thumbprint: 'x' } } as never), 'agent:https://agent.example')
  t.equal(sessionOwner(null), 'public')
})

t.test('session ids: visible ASCII, 1 to 256, once', async (t) => {
  t.equal(requestedSession({}), undefined)
  t.equal(requestedSession({ 'mcp-session-id': 'abc-123_~!' }), 'abc-123_~!')
  for (const bad of ['', 'a b', 'a\tb', 'x'.repeat(257), 'caf\u00e9', 'a, b']) {
    t.throws(() => requestedSession({ 'mcp-session-id': bad }), { code: 'MCP_SESSION_NOT_FOUND' }, JSON.stringify(bad.slice(0, 10)))
  }
  t.equal(requestedSession({ 'mcp-session-id': 'x'.repeat(256) })?.length, 256)
})

t.test('bound on the answer, checked before the upstream, forgotten on the owner\'s DELETE', async (t) => {
  const store = createMemoryStore()
  t.teardown(async () => { await store.close() })
  t.equal(checkSession(store, plainRoute, bob, { 'mcp-session-id': 's1' }), undefined, 'a route that is not MCP checks nothing')
  t.equal(checkSession(store, mcpRoute, alice, {}), undefined, 'a request naming no session passes unchecked')
  t.equal(await codeOf(checkSession(store, mcpRoute, alice, { 'mcp-session-id': 's1' })), 'MCP_SESSION_NOT_FOUND', 'an id never issued')

  t.equal(sessionAnswer(store, mcpRoute, { method: 'POST', session: undefined, auth: alice }, 400, { 'mcp-session-id': 's1' }), undefined,
    'a refusal binds nothing')
  await sessionAnswer(store, mcpRoute, { method: 'POST', session: undefined, auth: alice }, 200, { 'mcp-session-id': 's1' })
  t.equal(await codeOf(checkSession(store, mcpRoute, alice, { 'mcp-session-id': 's1' })), undefined, 'the opener passes')
  t.equal(await codeOf(checkSession(store, mcpRoute, bob, { 'mcp-session-id': 's1' })), 'MCP_SESSION_NOT_FOUND', 'another user does not')
  t.equal(await codeOf(sessionAnswer(store, mcpRoute, { method: 'POST', session: undefined, auth: bob }, 200, { 'mcp-session-id': 's1' })),
    'UPSTREAM_UNAVAILABLE', 'an upstream issuing a held id to another user: the answer is refused')
  t.equal(await codeOf(checkSession(store, mcpRoute, alice, { 'mcp-session-id': 's1' })), undefined, 'and the session stays its opener\'s')

  await sessionAnswer(store, mcpRoute, { method: 'DELETE', session: 's1', auth: alice }, 404, {})
  t.equal(await codeOf(checkSession(store, mcpRoute, alice, { 'mcp-session-id': 's1' })), undefined, 'a DELETE the upstream refused ends nothing')
  await sessionAnswer(store, mcpRoute, { method: 'DELETE', session: 's1', auth: alice }, 200, {})
  t.equal(await codeOf(checkSession(store, mcpRoute, alice, { 'mcp-session-id': 's1' })), 'MCP_SESSION_NOT_FOUND', 'an accepted DELETE ends it')
})

t.test('the store away: the check fails closed, and an answer opening a session is not handed out', async (t) => {
  const inner = createMemoryStore()
  t.teardown(async () => { await inner.close() })
  const away = async (): Promise<never> => { throw new GatewayError('STORE_UNAVAILABLE', 'away') }
  const store: Store = { ...inner, mcpSessionOwner: away, bindMcpSession: away }
  const onStoreDownAllow = { ...mcpRoute, onStoreDown: 'allow' as const }
  t.equal(await codeOf(checkSession(store, onStoreDownAllow, alice, { 'mcp-session-id': 's1' })), 'STORE_UNAVAILABLE', 'refused 503, whatever onStoreDown')
  t.equal(await codeOf(sessionAnswer(store, mcpRoute, { method: 'POST', session: undefined, auth: alice }, 200, { 'mcp-session-id': 's2' })),
    'STORE_UNAVAILABLE', 'the answer carrying a new session id is replaced')
})
