// docs/agents.md's configurations, read from the page and checked as keygate checks them at start:
// the route file of "Letting agents in" and the agents file of "Directories: fetched, pinned, and
// their outages", each value as the comments say; and the agents file's refusals.
import t from 'tap'
import { parse as parseYaml } from 'yaml'
import { agentsFromDocument } from '../../../../gateway/src/agents/agents-file.js'
import { routesOfText } from '../../../helpers/routes.js'
import { docSnippet } from '../../../helpers/docs.js'

const PAGE = 'docs/agents.md'

t.test(`${PAGE}, "Letting agents in": an agent route for any agent, one for named agents, a user's agent`, async (t) => {
  const routes = routesOfText(docSnippet(PAGE, 'Letting agents in', 'yaml'))
  t.same(routes.map((r) => [r.name, r.auth]), [['catalogue-for-agents', 'agent'], ['orders-by-trusted-agents', 'agent'], ['assistant', 'bearer']])
  t.equal(routes[0]?.agents, 'any')
  t.same([...(routes[1]?.agents as Set<string>)], ['https://chatgpt.com', 'https://agent.example'])
  t.equal(routes[2]?.agents, 'any', 'a bearer route that names agents: the token and an agent\'s signature')
})

t.test(`${PAGE}, the agents file: one directory pinned with its key, one fetched on a private address`, async (t) => {
  const settings = await agentsFromDocument(parseYaml(docSnippet(PAGE, 'Directories: fetched, pinned, and their outages', 'yaml')), 'agents.yaml')
  t.same(settings.pinned.map((d) => [d.origin, d.keys.length]), [['https://agent.example', 1]])
  // RFC 9421's Ed25519 test key: its JWK thumbprint, as an agent's keyid names it
  t.equal(settings.pinned[0]?.keys[0]?.thumbprint, 'poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U')
  t.same([...settings.privateOrigins], ['https://crawler.internal.example'])
})

t.test('the agents file: every mistake named', async (t) => {
  await t.rejects(agentsFromDocument({ directories: [{ origin: 'https://a.example/' }, { origin: 'http://b.example', keys: [{ kty: 'oct', k: 'AA' }] }] }, 'agents.yaml'), {
    name: 'AgentsFileError',
    message: /directories\[0\]\.origin: "https:\/\/a\.example\/" is not an origin[\s\S]*directories\[1\]\.origin: "http:\/\/b\.example" is not an origin/
  })
  await t.rejects(agentsFromDocument({ directories: [{ origin: 'https://a.example' }] }, 'agents.yaml'), { message: /give its keys .* or privateAddress: true/ })
  await t.rejects(agentsFromDocument({ directories: [{ origin: 'https://a.example', keys: [{ kty: 'OKP', crv: 'Ed25519', x: 'AA', d: 'AA' }] }] }, 'agents.yaml'),
    { message: /carries private key material/ })
  await t.rejects(agentsFromDocument({ directory: [] }, 'agents.yaml'), { name: 'AgentsFileError' })
})
