// The admin API's POST /v1/reload on one gateway (on Redis): the route, issuers and agents files
// re-read together, the answer saying what changed in each; a file with mistakes refuses the
// whole reload (422 CONFIG_FILE_INVALID, every mistake named, no file put in force, the good
// ones' changes included); an issuer removed has its tokens refused at once, verified ones
// included; one added has its tokens accepted as soon as the answer comes; the audit line. A
// real OpenID Provider (oidc-provider) issues the tokens; real sockets.
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { admin, startAdminGateway } from '../../../helpers/admin.js'
import { send } from '../../../helpers/http.js'
import { startTestIdp } from '../../../helpers/oidc-provider.js'
import { routeFile } from '../../../helpers/routes.js'
import { rsaKeyPair } from '../../../helpers/keys.js'
import { registerKey, sendSigned, startUpstreamStub } from '../../../helpers/stack.js'

const PROBLEM = 'application/problem+json; charset=utf-8'

const issuerEntry = (name: string, idp: { issuer: string, audience: string }): string =>
  `  - { name: ${name}, issuer: "${idp.issuer}", audiences: ["${idp.audience}"] }\n`

t.test('POST /v1/reload: every file at once, what changed in each; a bad file refuses all', async (t) => {
  const upstream = await startUpstreamStub(t)
  const [corp, partner] = await Promise.all([startTestIdp(t), startTestIdp(t)])
  const reportsRoute = `  - { name: reports, path: /reports, upstream: "${upstream}", auth: bearer, rewrite: /healthz }\n` +
    `  - { name: signed, path: /signed, upstream: "${upstream}", auth: signed, rewrite: /healthz }\n`
  const routes = routeFile(t, `routes:\n${reportsRoute}`)
  const issuers = join(routes.path, '..', 'issuers.yaml')
  writeFileSync(issuers, `issuers:\n${issuerEntry('corp', corp)}`)
  const agents = join(routes.path, '..', 'agents.yaml')
  writeFileSync(agents, 'directories:\n  - { origin: "https://a.example", privateAddress: true }\n')
  const gw = await startAdminGateway(t, {
    upstreamUrl: upstream,
    config: { routesFile: routes.path, identityProviders: { file: issuers, oidc: undefined }, agentDirectoriesFile: agents }
  })
  const bearer = async (token: string): Promise<{ status: number, code: unknown }> => {
    const res = await send(gw.url, '/reports', { headers: { authorization: `Bearer ${token}` } })
    return { status: res.status, code: res.status === 200 ? undefined : res.json().code }
  }
  const corpToken = await corp.clientCredentialsToken([])
  const partnerToken = await partner.clientCredentialsToken([])
  t.same(await bearer(corpToken), { status: 200, code: undefined }, 'corp\'s token is accepted (and now verified, cached)')
  t.same(await bearer(partnerToken), { status: 401, code: 'INVALID_TOKEN' }, 'partner is not trusted yet')
  // corp's user registers a key: a signed request carries its bearer token too
  const pair = rsaKeyPair()
  t.equal((await registerKey(gw.url, corpToken, pair, 'laptop')).status, 201)
  const signed = async (): Promise<number> => (await sendSigned(gw.url, { keys: pair, token: corpToken, method: 'GET', target: '/signed' })).status
  t.equal(await signed(), 200, 'corp\'s user signs with its key')

  await t.test('nothing changed: an answer of empty changes', async (t) => {
    const res = await admin(gw, 'POST', '/v1/reload')
    t.equal(res.status, 200, res.text)
    t.same(res.json(), {
      routes: { file: routes.path, added: [], removed: [], changed: [] },
      issuers: { file: issuers, added: [], removed: [], changed: [] },
      agents: { file: agents, added: [], removed: [], changed: [] }
    }, 'one process: no worker count')
  })

  await t.test('a bad issuers file: 422, every file in force stays, the route file\'s change too', async (t) => {
    routes.write(`routes:\n${reportsRoute}  - { name: open, path: /open, upstream: "${upstream}", auth: public, rewrite: /healthz }\n`)
    writeFileSync(issuers, `issuers:\n${issuerEntry('corp', corp)}  - { name: Bad Name, issuer: "ftp://x", audiences: [] }\n`)
    writeFileSync(agents, 'directories:\n  - { origin: "http://a.example" }\n')
    const res = await admin(gw, 'POST', '/v1/reload')
    t.equal(res.status, 422)
    t.equal(res.headers['content-type'], PROBLEM)
    const problem = res.json<{ code: string, files: string[], problems: string[], detail: string }>()
    t.equal(problem.code, 'CONFIG_FILE_INVALID')
    t.same(problem.files, [issuers, agents], 'the two refused files, not the good route file')
    t.ok(problem.problems.some((p) => p.startsWith(`${issuers}: issuers[1].name`)), 'each problem names its file and field')
    t.ok(problem.problems.some((p) => p.startsWith(`${issuers}: issuers[1].audiences`)))
    t.ok(problem.problems.some((p) => p.startsWith(`${agents}: directories[0].origin`)))
    t.match(problem.detail, /every file in force stays/)
    t.equal((await send(gw.url, '/open')).status, 404, 'the route file\'s new route is not in force either: all or nothing')
    t.same(await bearer(corpToken), { status: 200, code: undefined }, 'corp still trusted')
    t.match(gw.lines.findLast((l) => l.audit !== undefined), { audit: { action: 'config.reload', outcome: 'invalid', status: 422 } })
  })

  await t.test('corp removed, partner added: corp\'s cached token refused at once, partner\'s accepted', async (t) => {
    writeFileSync(issuers, `issuers:\n${issuerEntry('partner', partner)}`)
    writeFileSync(agents, 'directories:\n  - { origin: "https://b.example", privateAddress: true }\n')
    const res = await admin(gw, 'POST', '/v1/reload')
    t.equal(res.status, 200, res.text)
    t.same(res.json(), {
      routes: { file: routes.path, added: ['open'], removed: [], changed: [] },
      issuers: { file: issuers, added: ['partner'], removed: ['corp'], changed: [] },
      agents: { file: agents, added: ['https://b.example'], removed: ['https://a.example'], changed: [] }
    })
    t.same(await bearer(corpToken), { status: 401, code: 'INVALID_TOKEN' }, 'corp\'s token, verified before, refused')
    t.equal(await signed(), 401, 'and its user\'s key signs for nothing: the request\'s bearer token is refused')
    t.same(await bearer(partnerToken), { status: 200, code: undefined }, 'partner\'s token accepted, its keys fetched before the answer')
    t.equal((await send(gw.url, '/open')).status, 200, 'the new route serves')
    t.match(gw.lines.findLast((l) => l.msg === 'configuration reloaded'), { issuers: { removed: ['corp'] } }, 'logged')
    t.match(gw.lines.findLast((l) => l.audit !== undefined), {
      audit: { action: 'config.reload', outcome: 'reloaded', issuers: { added: 1, removed: 1, changed: 0 }, status: 200 }
    })
  })

  await t.test('the last issuer removed: issuers: [] is a file like any other', async (t) => {
    writeFileSync(issuers, 'issuers: []\n')
    const res = await admin(gw, 'POST', '/v1/reload')
    t.equal(res.status, 200, res.text)
    t.match(res.json(), { issuers: { removed: ['partner'], added: [] } })
    t.same(await bearer(partnerToken), { status: 401, code: 'INVALID_TOKEN' })
    t.equal((await send(gw.url, '/readyz')).status, 200, 'ready: no issuer whose keys it lacks')
    writeFileSync(issuers, `issuers:\n${issuerEntry('corp', corp)}`)
    t.equal((await admin(gw, 'POST', '/v1/reload')).status, 200)
    t.same(await bearer(corpToken), { status: 200, code: undefined }, 'and back')
  })
})

t.test('a gateway with none of the files: nothing to reload, every file null', async (t) => {
  const upstream = await startUpstreamStub(t)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream })
  const res = await admin(gw, 'POST', '/v1/reload')
  t.equal(res.status, 200, res.text)
  const none = { file: null, added: [], removed: [], changed: [] }
  t.same(res.json(), { routes: none, issuers: none, agents: none })
})
