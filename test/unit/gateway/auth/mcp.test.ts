// An MCP route's stages (auth/mcp.ts) over a described request: the Origin and the content type
// before the body; the messages once read, their id kept for the refusal; each message against the
// policy with the scopes the scope stage found, a key's narrowed ones included, and the refusal's
// challenge on a protected resource's route naming the scopes to ask for and the metadata.
import t from 'tap'
import type { DescribedRequest } from '../../../../gateway/src/auth/described-request.js'
import { mcpMessageStage, mcpPolicyStage, mcpRequestStage } from '../../../../gateway/src/auth/mcp.js'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { GatewayError } from '../../../../gateway/src/errors.js'
import { compilePolicy } from '../../../../gateway/src/mcp-calls/policy.js'
import { resourceChallenge } from '../../../../gateway/src/resources/challenge.js'
import { protectedResource } from '../../../../gateway/src/resources/resource.js'
import { scopeSet } from '../../../../gateway/src/users/scopes.js'

const policy = compilePolicy({ tools: { 'search_*': ['mcp:read'], wipe: 'deny' }, origins: ['https://app.example.com'] })

function described (method: string, headers: Record<string, string>, body?: string): DescribedRequest {
  return {
    method,
    target: '/mcp',
    headers,
    field: (name) => headers[name] === undefined ? undefined : [headers[name] as string],
    scheme: 'http',
    authority: 'keygate',
    ip: '127.0.0.1',
    declaresBody: body !== undefined,
    declaredLength: body === undefined ? undefined : Buffer.byteLength(body),
    body: body === undefined ? undefined : Buffer.from(body)
  }
}

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'mcp-protocol-version': '2025-06-18' }
const call = (name: string): string => JSON.stringify({ jsonrpc: '2.0', id: 'c1', method: 'tools/call', params: { name } })

function codeOf (fn: () => unknown): string | undefined {
  try {
    fn()
    return undefined
  } catch (err) {
    if (err instanceof GatewayError) return err.code
    throw err
  }
}

t.test('before the body: the Origin, then the content type', async (t) => {
  const stage = mcpRequestStage()
  const run = (method: string, headers: Record<string, string>): string | undefined => codeOf(() => stage.run(described(method, headers), { mcp: policy }))
  t.equal(stage.needsBody, false)
  t.equal(run('POST', JSON_HEADERS), undefined, 'no Origin: not a browser page')
  t.equal(run('POST', { ...JSON_HEADERS, origin: 'https://app.example.com' }), undefined, 'a listed Origin')
  t.equal(run('GET', { origin: 'https://evil.example' }), 'ORIGIN_NOT_ALLOWED', 'any method')
  t.equal(run('POST', { ...JSON_HEADERS, origin: 'https://app.example.com.evil.example' }), 'ORIGIN_NOT_ALLOWED', 'exactly, not a prefix')
  t.equal(run('POST', { 'content-type': 'text/plain' }), 'UNSUPPORTED_MEDIA_TYPE')
  t.equal(run('POST', { 'content-type': 'application/json; charset=latin1' }), 'UNSUPPORTED_MEDIA_TYPE', 'another charset')
  t.equal(run('POST', {}), 'UNSUPPORTED_MEDIA_TYPE', 'none')
  t.equal(codeOf(() => stage.run(described('POST', { 'content-type': 'text/plain' }), {})), undefined, 'a route without mcp: nothing checked')
})

t.test('the body, and the policy with the request\'s scopes', async (t) => {
  const judge = (body: string, state: AuthState): string | undefined => codeOf(() => {
    const request = described('POST', JSON_HEADERS, body)
    void mcpMessageStage().run(request, state)
    void mcpPolicyStage().run(request, state)
  })
  const reader: AuthState = { mcp: policy, requiredScopes: ['mcp:use'], scopes: scopeSet(['mcp:use', 'mcp:read']) }
  t.equal(judge(call('search_web'), { ...reader }), undefined, 'a tool within the scopes')
  t.equal(judge(call('wipe'), { ...reader }), 'MCP_CALL_DENIED', 'deny: whatever the scopes')
  t.equal(judge(call('other'), { ...reader }), undefined, 'unlisted, no default: the route\'s scopes suffice')
  const account = { scopes: scopeSet(['mcp:use', 'mcp:read']) } as AuthState['account']
  const narrowed: AuthState = { mcp: policy, requiredScopes: ['mcp:use'], scopes: scopeSet(['mcp:use']), ...(account !== undefined && { account }) }
  let refusal: GatewayError | undefined
  try {
    const request = described('POST', JSON_HEADERS, call('search_web'))
    void mcpMessageStage().run(request, narrowed)
    void mcpPolicyStage().run(request, narrowed)
  } catch (err) { refusal = err as GatewayError }
  t.equal(refusal?.code, 'INSUFFICIENT_SCOPE', 'a key narrowed below its user: its own scopes count')
  t.same(refusal?.extra, { requiredScopes: ['mcp:use', 'mcp:read'], missingScopes: ['mcp:read'] }, 'the route\'s scopes and the call\'s')
  t.equal(narrowed.mcpId, 'c1', 'the id the JSON-RPC error carries')
  const resource = protectedResource({ id: 'https://api.example.com/mcp', name: 'MCP', issuers: ['corp'] })
  t.equal(resourceChallenge(refusal as GatewayError, resource, undefined),
    'Bearer realm="keygate", error="insufficient_scope", scope="mcp:use mcp:read", ' +
    'resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp"', 'the challenge of a protected resource\'s route')
  const state: AuthState = { mcp: policy }
  t.equal(judge('{"jsonrpc":"2.0","id":"k9","method":"tools/call","params":{"name":"a","Name":"b"}}', state), 'MCP_INVALID_MESSAGE')
  t.equal(state.mcpId, 'k9', 'a refused message keeps its id')
  t.equal(codeOf(() => mcpMessageStage().run({ ...described('POST', JSON_HEADERS), body: 'unseen' }, { mcp: policy })), 'UNSEEN_BODY',
    'decision mode without the body: refused, never passed unjudged')
  t.equal(codeOf(() => mcpMessageStage().run(described('DELETE', {}, '{}'), { mcp: policy })), 'MCP_INVALID_MESSAGE', 'a DELETE with a body')
  t.equal(codeOf(() => mcpMessageStage().run(described('POST', JSON_HEADERS), { mcp: policy })), 'MCP_INVALID_MESSAGE', 'a POST without one')
})
