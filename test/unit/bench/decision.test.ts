// --scenario decision's figures, from configurations' rounds as the bench records them: the ratios
// h / g and d / g of requests/s and h / d of keygate's CPU per request, each with its range over
// the rounds, and what a run without one of them says; and the nginx configuration it runs, read
// from its page with only the `# EDIT:` lines changed. The end-to-end run is
// test/system/bench-decision.test.ts's.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import type { Measurement } from '../../../bench/measure.js'
import { loadDecisionConfig } from '../../../bench/nginx.js'
import { decisionFiguresOf } from '../../../bench/figures.js'
import { medianOf, type ConfigResult, type Figure, type Machine } from '../../../bench/report.js'
import { headlineLines } from '../../../bench/report-text.js'

const RUN = { scheme: 'seed', keyType: 'rsa' }

/** a configuration measured in rounds 1, 2, 3 ... with these req/s and CPU us per request */
function config (id: string, rounds: Array<{ rps: number; cpu: number; nginx?: number; refused?: number }>): ConfigResult {
  const measured = rounds.map(({ rps, cpu, nginx, refused = 0 }, i) => ({
    requests: rps,
    seconds: 1,
    rps,
    latency: { p50: 1 },
    statuses: { 200: rps - refused, ...(refused > 0 && { 403: refused }) },
    codes: {},
    socketErrors: 0,
    timeouts: 0,
    perSecond: [rps],
    cpuPerRequestUs: cpu,
    upstreamCpuPerRequestUs: 20,
    redisCpuPerRequestUs: null,
    nginxCpuPerRequestUs: nginx ?? null,
    generatorCpuPercent: 20,
    otherCpuPercent: 5,
    round: i + 1,
    position: 0,
    inlineSignedPosts: 0
  } satisfies Measurement & { round: number; position: number; inlineSignedPosts: number }))
  return { id, label: id, url: 'http://127.0.0.1:1', cpuOf: 'keygate', rounds: measured, median: { ...medianOf(measured), ratioToBare: null } }
}

const measured = (figure: Figure | { value: null; why: string }): Figure => {
  if (figure.value === null) throw new Error(`not measured: ${figure.why}`)
  return figure
}

const g = config('g', [{ rps: 10_000, cpu: 30 }, { rps: 8000, cpu: 40 }, { rps: 9000, cpu: 35 }])
const h = config('h', [{ rps: 5000, cpu: 90, nginx: 60 }, { rps: 4000, cpu: 100, nginx: 70 }, { rps: 6300, cpu: 80, nginx: 65 }])
const d = config('d', [{ rps: 7000, cpu: 120 }, { rps: 6000, cpu: 125 }, { rps: 6300, cpu: 100 }])

t.test('the ratios, from the medians; their ranges, the same ratio in each round', async (t) => {
  const f = decisionFiguresOf([d, g, h], RUN)
  t.same(f.rps, { nginx: 9000, decision: 5000, inline: 6300 })
  t.match(measured(f.decisionToNginx), { value: 0.56, perRound: [0.5, 0.5, 0.7], min: 0.5, max: 0.7 })
  t.match(measured(f.inlineToNginx), { value: 0.7, perRound: [0.7, 0.75, 0.7] })
  t.match(measured(f.keygateCpuUs.decision), { value: 90, perRound: [90, 100, 80] })
  t.match(measured(f.keygateCpuUs.inline), { value: 120, perRound: [120, 125, 100] })
  t.match(measured(f.decisionToInlineCpu), { value: 0.75, perRound: [0.75, 0.8, 0.8] })
  t.same(f.nginxCpuUs, { alone: 35, decision: 65 }, 'nginx: g\'s CPU per request (the load goes to it), h\'s nginx beside keygate')
  t.same(f.decisions, { allowed: 5000, notAllowed: 0 })
  t.match(measured(f.decisionToInlineCpu).how, /^h's keygate CPU us\/req \/ d's/)
})

t.test('refused decisions are counted; a run without g says what it needs', async (t) => {
  const refusing = config('h', [{ rps: 5000, cpu: 90, nginx: 60, refused: 10 }])
  const f = decisionFiguresOf([config('d', [{ rps: 6000, cpu: 120 }]), refusing], RUN)
  t.same(f.decisions, { allowed: 4990, notAllowed: 10 })
  t.match(f.decisionToNginx, { value: null, why: /needs h and a configuration that did not run/ })
  t.equal(f.rps.nginx, null)
  t.equal(measured(f.decisionToInlineCpu).value, 0.75)
})

t.test('the report opens with them, then the machine; "how" for each figure given', async (t) => {
  const machine: Machine = {
    cpus: 2, cpuModel: 'AMD EPYC', node: 'v24.0.0', platform: 'linux-x64', loadAverage: { start: [0.5], end: [1] }, otherCpuPercent: { median: 3, max: 5 }
  }
  const none = { value: null, why: 'decision' } as const
  const decision = decisionFiguresOf([d, g, h], RUN)
  const lines = headlineLines({ figures: { ...RUN, authLayerCpuUs: none, signedRequestsPerSecondPerCore: none }, machine, decision })
  t.same(lines.figures.slice(0, -1), [
    'decision mode behind nginx, seed scheme, rsa key: g nginx alone 9,000 req/s, h nginx asking keygate 5,000 req/s, d keygate inline 6,300 req/s (medians)',
    'throughput h / g, nginx asking keygate over nginx alone: 0.56x (3 rounds: 0.50 to 0.70)',
    'throughput d / g, keygate inline over nginx alone: 0.70x (3 rounds: 0.70 to 0.75)',
    'keygate deciding (h), seed scheme, rsa key: 90 us of keygate CPU per signed GET (3 rounds: 80 to 100)',
    'keygate inline (d), seed scheme, rsa key: 120 us of keygate CPU per signed GET (3 rounds: 100 to 125)',
    'keygate CPU h / d, deciding over inline: 0.75x (3 rounds: 0.75 to 0.80)',
    'nginx CPU per request: 35 us alone (g), 65 us asking keygate (h)',
    'decisions: 5,000 allowed (2xx), 0 not (medians per round)'
  ])
  t.match(lines.figures.at(-1), /^machine: 2 cores \(AMD EPYC\)/)
  t.equal(lines.how.length, 5)
})

t.test('the nginx configuration: the page\'s block, only its # EDIT: lines pointed at this run', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-decision-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const page = (block: string): string => {
    const file = join(dir, `page-${Math.random()}.md`)
    writeFileSync(file, `# nginx\n\n## Before\n\n\`\`\`nginx\nnot this\n\`\`\`\n\n## The configuration\n\nText.\n\n\`\`\`nginx\n${block}\n\`\`\`\n`)
    return file
  }
  const block = [
    'upstream keygate_decision {',
    '    server 127.0.0.1:8081;          # EDIT: keygate\'s decision listener',
    '    keepalive 16;',
    '}',
    'upstream app {',
    '    server 127.0.0.1:3000;          # EDIT: your application',
    '}',
    'server {',
    '    listen 80;                      # EDIT: your listen address',
    '    auth_request /_keygate;',
    '}'
  ]
  const config = loadDecisionConfig(page(block.join('\n')))(4321, 'http://127.0.0.1:9001', 'http://127.0.0.1:9002')
  const expected = [...block]
  expected[1] = '    server 127.0.0.1:9001;'
  expected[5] = '    server 127.0.0.1:9002;'
  expected[8] = '    listen 127.0.0.1:4321;'
  t.same(config.split('\n'), expected)
  t.throws(() => loadDecisionConfig(page(block.filter((line) => !line.includes('listen')).join('\n'))), /has not one `# EDIT:` line for its listen address/)
  t.throws(() => loadDecisionConfig(page(`${block.join('\n')}\n    root /srv; # EDIT: where`)), /an `# EDIT:` line --scenario decision cannot fill: root/)
  t.throws(() => loadDecisionConfig(join(dir, 'none.md')), /--scenario decision runs the nginx configuration of .*none\.md/)
})
