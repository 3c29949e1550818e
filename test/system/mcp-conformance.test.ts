// The MCP conformance suite (@modelcontextprotocol/conformance, the MCP project's own, a
// devDependency; its runner needs Node >= 22: the devDependency `node`) runs its server scenarios
// against an MCP server with the suite's fixtures (the tools, resources and prompts its scenarios
// call, as its reference server defines them: test/helpers/mcp-conformance-server.ts, on the MCP
// SDK) directly, then through a keygate MCP route in front of it (issue 42, point 9; docs/mcp.md,
// "Tested with"). Each scenario's checks must come out the same both ways, check by check:
// keygate's strict reading, Origin rule, session binding and stream passing change nothing a
// conforming client sees, including the server's own requests (sampling, elicitation) on a tool
// call's SSE answer and the client's answers to them, POSTed back. One exception, by design:
// dns-rebinding-protection, which the server alone fails (it answers a foreign Origin) and keygate
// passes (the route's `origins`, the MCP specification's MUST). The suite's runner runs all its active server
// scenarios in one process per URL (two runs, ~2 s each), with a timeout.
import { spawn } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startConformanceServer } from '../helpers/mcp-conformance-server.js'
import { NODE_24 } from '../helpers/mcp-everything.js'
import { freePort } from '../helpers/redis.js'
import { routesFromYaml } from '../helpers/routes.js'
import { startTestGateway } from '../helpers/stack.js'

const CONFORMANCE = createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/dist/index.js')
const RUN_TIMEOUT_MS = 60_000

interface Check { id: string, status: string, errorMessage?: string }
/** scenario name to its checks' `id: STATUS` */
type Results = Map<string, string[]>

/** The suite's server scenarios against `url`, in one runner process; each scenario's checks, from its checks.json. */
async function runSuite (url: string): Promise<{ results: Results, output: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-conformance-'))
  try {
    const child = spawn(NODE_24, [CONFORMANCE, 'server', '--url', url, '-o', dir], {
      cwd: dir, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'], timeout: RUN_TIMEOUT_MS, killSignal: 'SIGKILL'
    })
    let output = ''
    child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
    child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
    // exit 1 when any check fails: the results, not the code, are compared
    const exit = await new Promise<{ code: number | null, signal: string | null }>((resolve) => {
      child.once('close', (code, signal) => { resolve({ code, signal }) })
    })
    if (exit.signal !== null) throw new Error(`the conformance runner was stopped (${exit.signal}) after ${RUN_TIMEOUT_MS} ms: ${output}`)
    const results: Results = new Map()
    for (const entry of readdirSync(dir)) {
      const scenario = /^server-(.+)-\d{4}-\d\d-\d\dT[\d-]+Z$/.exec(entry)?.[1]
      if (scenario === undefined) continue
      const checks = JSON.parse(readFileSync(join(dir, entry, 'checks.json'), 'utf8')) as Check[]
      results.set(scenario, checks.map((check) => `${check.id}: ${check.status}`))
    }
    return { results, output }
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

const passing = (results: Results): string[] =>
  [...results].filter(([, checks]) => checks.every((check) => check.endsWith(': SUCCESS'))).map(([name]) => name).sort()

t.test('the MCP conformance suite\'s server scenarios: through keygate as directly', async (t) => {
  const server = await startConformanceServer(t)
  const port = await freePort()
  const origin = `http://127.0.0.1:${port}`
  const gw = await startTestGateway(t, {
    store: 'memory',
    port,
    upstreamUrl: new URL(server.url).origin,
    routes: (upstream) => routesFromYaml(`routes:
  - path: /mcp
    upstream: ${upstream}
    auth: public
    mcp:
      origins: [${origin}]
`, upstream)
  })

  // the server stops before keygate closes: keygate still holds the GET streams the suite's client
  // opened and left (quiet streams, held until the route's timeoutMs: see mcp-everything.test.ts's
  // todo), and its close would wait for them
  t.teardown(server.stop)

  const direct = await runSuite(server.url)
  const through = await runSuite(`${gw.url}/mcp`)
  t.comment(`directly: ${passing(direct.results).length} of ${direct.results.size} scenarios pass; ` +
    `through keygate: ${passing(through.results).length} of ${through.results.size}`)

  t.ok(direct.results.size >= 20, `the suite ran its scenarios (${direct.results.size})`)
  t.same([...through.results.keys()].sort(), [...direct.results.keys()].sort(), 'the same scenarios ran both ways')
  for (const [scenario, checks] of direct.results) {
    if (scenario === 'dns-rebinding-protection') continue
    t.same(through.results.get(scenario), checks, `${scenario}: the same checks, the same results`)
  }
  t.same(through.results.get('dns-rebinding-protection'), [
    'localhost-host-rebinding-rejected: SUCCESS',
    'localhost-host-valid-accepted: SUCCESS'
  ], 'dns-rebinding-protection: keygate refuses the foreign Origin (the route\'s origins) and takes its own')
  t.match(direct.results.get('dns-rebinding-protection'), ['localhost-host-rebinding-rejected: FAILURE'], 'which the server alone does not')
  t.same(passing(direct.results), [...direct.results.keys()].filter((name) => name !== 'dns-rebinding-protection').sort(),
    'directly, every scenario but dns-rebinding-protection passes')
  t.equal(passing(through.results).length, through.results.size, 'through keygate, every one')
})
