import t from 'tap'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { createIdentityTokenIssuer, identityHeaderNames, identityTokenFor } from '../../../../gateway/src/proxy/identity.js'
import { route } from '../../../../gateway/src/proxy/route.js'
import type { IdentityClaims, TokenService } from '../../../../gateway/src/tokens/token-service.js'

const DEFAULTS = { bodyLimit: 1024, timeoutMs: 5000 }
const withToken = route({ prefix: '/', upstream: 'http://u', auth: 'bearer', identityToken: { header: 'x-proof', ttlSeconds: 60, audience: 'http://u' } }, DEFAULTS)
const withoutToken = route({ prefix: '/', upstream: 'http://u', auth: 'bearer' }, DEFAULTS)

/** A token service that counts what it signs: the tokens are strings naming their claims. */
function countingTokens (): { tokens: TokenService; issued: string[] } {
  const issued: string[] = []
  const tokens = {
    issueIdentity: async ({ subject, audience, apiKey, agent }: IdentityClaims) => {
      const token = `${subject}|${audience}|${apiKey ?? ''}|${issued.length}${agent === undefined ? '' : `|agent=${agent.origin} ${agent.jkt}`}`
      issued.push(token)
      return token
    }
  } as unknown as TokenService
  return { tokens, issued }
}

t.test('identityHeaderNames: the names a client may never send on the route', async (t) => {
  const names = ['x-gateway-user', 'x-gateway-key', 'x-gateway-key-name', 'x-gateway-scopes', 'x-gateway-agent', 'x-gateway-agent-key',
    'x-gateway-dpop-jkt']
  t.same(identityHeaderNames(withoutToken), names)
  t.same(identityHeaderNames(withToken), [...names, 'x-proof'])
})

t.test('identityTokenFor: only on a route that asks for one, and only for a known user', async (t) => {
  const { tokens, issued } = countingTokens()
  const issuer = createIdentityTokenIssuer(tokens)
  t.equal(identityTokenFor(issuer, withoutToken, { user: 'alice' }), undefined)
  t.equal(identityTokenFor(issuer, withToken, {}), undefined)
  t.equal(identityTokenFor(issuer, withToken, null), undefined)
  const auth: AuthState = { user: 'alice' }
  t.equal(await identityTokenFor(issuer, withToken, auth), 'alice|http://u||0')
  t.equal(issued.length, 1)
})

t.test('tokens are reused for most of their lifetime, per identity', async (t) => {
  let now = 1_000_000
  const { tokens, issued } = countingTokens()
  const issuer = createIdentityTokenIssuer(tokens, () => now)
  const config = { header: 'x-proof', ttlSeconds: 60, audience: 'http://u' }
  const first = await issuer.tokenFor(config, 'alice', undefined)
  t.equal(await issuer.tokenFor(config, 'alice', undefined), first, 'the same identity: the cached token')
  t.not(await issuer.tokenFor(config, 'bob', undefined), first, 'another user: another token')
  t.not(await issuer.tokenFor(config, 'alice', 'k'.repeat(64)), first, 'another key: another token')
  now += 60_000 * 0.75 + 1
  t.not(await issuer.tokenFor(config, 'alice', undefined), first, 'past three quarters of its lifetime: a new one')
  t.equal(issued.length, 4)
})

t.test('a signed agent: the agent claim; on an agent route (no user) the agent is the subject; cached per agent and its key', async (t) => {
  const { tokens, issued } = countingTokens()
  const issuer = createIdentityTokenIssuer(tokens)
  const agentRoute = route({
    prefix: '/', upstream: 'http://u', auth: 'agent', agents: 'any', identityToken: { header: 'x-proof', ttlSeconds: 60, audience: 'http://u' }
  }, DEFAULTS)
  const agent = { origin: 'https://agent.example', thumbprint: 'T1', pinned: false }
  t.equal(await identityTokenFor(issuer, agentRoute, { agent }), 'https://agent.example|http://u||0|agent=https://agent.example T1',
    'the subject is the agent\'s origin')
  t.equal(await identityTokenFor(issuer, agentRoute, { agent }), 'https://agent.example|http://u||0|agent=https://agent.example T1', 'cached')
  t.equal(await identityTokenFor(issuer, agentRoute, { agent: { ...agent, thumbprint: 'T2' } }), 'https://agent.example|http://u||1|agent=https://agent.example T2',
    'another key of the agent: another token')
  t.equal(await identityTokenFor(issuer, withToken, { user: 'alice', agent }), 'alice|http://u||2|agent=https://agent.example T1',
    'a user\'s agent: the user is the subject, the agent its claim')
  t.equal(await identityTokenFor(issuer, withToken, { user: 'alice' }), 'alice|http://u||3', 'the user alone: another token, without the claim')
  t.equal(issued.length, 4)
})
