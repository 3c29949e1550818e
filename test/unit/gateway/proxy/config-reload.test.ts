// The reload of every file, on its own: a file that cannot be read or has mistakes refuses the
// whole reload, naming the file in each problem, and nothing is put in force (not the good files'
// changes, nor the new issuers' keys, which are closed); a good reload puts all three in force and
// says what changed; a removed issuer's keys are closed once it is out of force. Real files.
import { writeFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { pino } from 'pino'
import t, { type Test } from 'tap'
import { loadAgentsFile } from '../../../../gateway/src/agents/agents-file.js'
import { createAgentsInForce } from '../../../../gateway/src/agents/agents-in-force.js'
import type { IssuerKeys } from '../../../../gateway/src/idp/issuer-keys.js'
import { createIssuersInForce } from '../../../../gateway/src/idp/issuers-in-force.js'
import { loadIssuersFile } from '../../../../gateway/src/idp/issuers.js'
import { createConfigReloader } from '../../../../gateway/src/proxy/config-reload.js'
import { createRouteRegistry } from '../../../../gateway/src/proxy/route-registry.js'
import { routeFile } from '../../../helpers/routes.js'

const DEFAULTS = { upstream: 'http://127.0.0.1:9', bodyLimit: 1024 * 1024, timeoutMs: 30_000 }
const route = (name: string): string => `  - { name: ${name}, prefix: /${name}/, upstream: "http://127.0.0.1:9", auth: public }\n`
const issuer = (name: string): string => `  - { name: ${name}, issuer: "https://${name}.example.com", audiences: [keygate], jwksUri: "https://${name}.example.com/jwks" }\n`

async function setUp (t: Test) {
  const routes = routeFile(t, `routes:\n${route('a')}`)
  const issuersFile = join(routes.path, '..', 'issuers.yaml')
  const agentsFile = join(routes.path, '..', 'agents.yaml')
  writeFileSync(issuersFile, `issuers:\n${issuer('corp')}`)
  writeFileSync(agentsFile, 'directories:\n  - { origin: "https://a.example", privateAddress: true }\n')
  const log = pino({ level: 'silent' })
  const registry = await createRouteRegistry({ routesFile: routes.path, routeDefaults: DEFAULTS, watchRoutes: false }, log)
  const closed: string[] = []
  const issuers = createIssuersInForce(await loadIssuersFile(issuersFile), {
    makeKeys: (config) => ({
      issuer: config,
      keyFor: async () => { throw new Error('not in this test') },
      start: async () => {},
      state: () => ({ usable: true, ageSeconds: 0, failures: 0, lastError: undefined }),
      close: () => { closed.push(config.name) }
    }) satisfies IssuerKeys,
    startKeys: async () => {}
  })
  const agents = createAgentsInForce(agentsFile, await loadAgentsFile(agentsFile))
  const reloader = createConfigReloader({ routes: registry, issuers: { file: issuersFile, inForce: issuers }, agents, log })
  return { routes, issuersFile, agentsFile, registry, issuers, agents, reloader, closed }
}

t.test('a file that cannot be read, or has mistakes, refuses all: nothing in force changes', async (t) => {
  const s = await setUp(t)
  s.routes.write(`routes:\n${route('a')}${route('b')}`)
  writeFileSync(s.issuersFile, `issuers:\n${issuer('corp')}${issuer('partner')}`)
  rmSync(s.agentsFile)
  const refused = await s.reloader.reload()
  t.same(refused, { outcome: 'invalid', files: [s.agentsFile], problems: [`${s.agentsFile}: cannot be read: ENOENT`] })
  t.same(s.registry.current.routes.map((r) => r.name), ['a'], 'the good route file\'s change is not in force')
  t.same(s.issuers.issuers.map((i) => i.name), ['corp'], 'nor the good issuers file\'s')

  writeFileSync(s.agentsFile, 'directories:\n  - { origin: "https://b.example", privateAddress: true }\n')
  const reloaded = await s.reloader.reload()
  t.same(reloaded, {
    outcome: 'reloaded',
    routes: { file: s.routes.path, added: ['b'], removed: [], changed: [] },
    issuers: { file: s.issuersFile, added: ['partner'], removed: [], changed: [] },
    agents: { file: s.agentsFile, added: ['https://b.example'], removed: ['https://a.example'], changed: [] }
  })
  t.same(s.registry.current.routes.map((r) => r.name), ['a', 'b'])
  t.same(s.issuers.issuers.map((i) => i.name), ['corp', 'partner'])
  t.ok(s.agents.named('https://b.example'))
})

t.test('a refused reload closes no key in force; a removed issuer\'s keys are closed once it is out', async (t) => {
  const s = await setUp(t)
  s.routes.write('routes:\n  - { name: x, prefix: /x/, upstream: "ftp://nowhere", auth: public }\n')
  writeFileSync(s.issuersFile, 'issuers: []\n')
  t.match(await s.reloader.reload(), { outcome: 'invalid', files: [s.routes.path], problems: [/routes\[0\]\.upstream/] })
  t.same(s.closed, [], 'corp\'s keys stay open: it is still in force')
  s.routes.write(`routes:\n${route('a')}`)
  const third = await s.reloader.reload()
  t.match(third, { outcome: 'reloaded', issuers: { removed: ['corp'] } })
  t.same(s.closed, ['corp'], 'removed: its keys closed')
})

t.test('a resource names issuers of the issuers file: the two are checked together, in every reload and at start', async (t) => {
  const s = await setUp(t)
  const resourceRoutes = (issuerName: string): string => 'resources:\n  - { id: "https://api.example.com/mcp", name: MCP, issuers: [' + issuerName + '] }\n' +
    'routes:\n  - { name: mcp, prefix: /mcp/, upstream: "http://127.0.0.1:9", auth: bearer, resource: "https://api.example.com/mcp" }\n'
  s.routes.write(resourceRoutes('partner'))
  const refused = await s.reloader.reload()
  t.same(refused, {
    outcome: 'invalid',
    files: [s.routes.path],
    problems: [`${s.routes.path}: resources: "https://api.example.com/mcp" names the issuer "partner", which is not a trusted issuer (known: corp)`]
  })
  t.same(s.registry.current.routes.map((r) => r.name), ['a'], 'nothing put in force')
  // the issuer renamed in both files at once: checked against the issuers that would be in force
  writeFileSync(s.issuersFile, `issuers:\n${issuer('partner')}`)
  t.match(await s.reloader.reload(), { outcome: 'reloaded', routes: { added: ['mcp'] }, issuers: { added: ['partner'], removed: ['corp'] } })

  // the routes alone (POST /v1/routes/reload, a watched file): checked against the issuers in force
  s.registry.checkWith((routes) => routes.some((r) => r.resource?.issuers.includes('partner') === true) ? [] : ['not partner'])
  s.routes.write(resourceRoutes('corp'))
  const alone = await s.registry.reload()
  t.match(alone, { ok: false, error: { message: /not partner/ } })
  t.same(s.registry.current.routes.map((r) => r.name), ['mcp'], 'the routes in force stay')
  t.throws(() => { s.registry.checkWith(() => ['wrong now']) }, { name: 'RouteFileError', message: /wrong now/ }, 'at start: the routes in force checked at once')
})
