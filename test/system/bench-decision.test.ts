// `npm run bench -- --scenario decision`: signed GETs through a real nginx alone (g), through nginx
// asking keygate's decision listener with the configuration of docs/decision/nginx.md (h), and to
// keygate inline (d), with tiny settings. The report opens with the scenario's figures (req/s of
// each, the ratios h/g and d/g, keygate's CPU per request deciding and inline, nginx's) and writes
// them to the JSON; every decision allows. No figure is held to a value: a second of load on a
// shared machine says nothing about which is faster, only that each was measured. Where nginx is
// missing, the bench says how to install it.
import { readFileSync } from 'node:fs'
import t, { type Test } from 'tap'
import type { BenchReport, Figure, NoFigure } from '../../bench/report.js'
import { TINY, alive, outDir, runBench as bench } from '../helpers/bench.js'
import { findNginx } from '../helpers/nginx.js'

const nginx = findNginx()

/** "1,234" read as 1234 */
const number = (text: string | undefined): number => Number((text ?? '').replace(/,/g, ''))

/** the figure, asserted to be a positive number */
function positive (t: Test, figure: Figure | NoFigure, name: string): void {
  t.ok(figure.value !== null && figure.value > 0, `${name}: ${figure.value === null ? `not measured: ${figure.why}` : figure.value}`)
  if (figure.value !== null) t.equal(figure.perRound.length, 1, `${name}: one round`)
}

t.test('--scenario decision: g, h and d measured; the figures on top of the report and in the JSON; every decision allowed', {
  skip: 'reason' in nginx ? nginx.reason : false
}, async (t) => {
  const run = await bench([...TINY, '--scenario', 'decision', '--out', outDir(t), ...('path' in nginx ? ['--nginx', nginx.path] : [])])
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const lines = run.stdout.split('\n')
  t.match(lines[1], /^keygate bench: scenario decision, seed scheme, rsa key, /, 'the title')

  // the first lines: req/s of each, the two ratios, keygate's CPU deciding and inline, nginx's, the decisions
  const [rates = '', hOverG = '', dOverG = '', deciding = '', inline = '', cpuRatio = '', nginxCpu = '', decisions = '', machine = ''] = lines.slice(2, 11)
  const rps = /^decision mode behind nginx, seed scheme, rsa key: g nginx alone ([\d,]+) req\/s, h nginx asking keygate ([\d,]+) req\/s, d keygate inline ([\d,]+) req\/s \(medians\)$/.exec(rates)
  t.ok(rps !== null && rps.slice(1).every((n) => number(n) > 0), `req/s of g, h and d: ${rates}`)
  t.ok(number(/: ([\d.]+)x \(1 round\)$/.exec(hOverG)?.[1]) > 0, `h / g: ${hOverG}`)
  t.match(hOverG, /^throughput h \/ g, nginx asking keygate over nginx alone: /)
  t.ok(number(/: ([\d.]+)x \(1 round\)$/.exec(dOverG)?.[1]) > 0, `d / g: ${dOverG}`)
  t.match(dOverG, /^throughput d \/ g, keygate inline over nginx alone: /)
  t.ok(number(/^keygate deciding \(h\), seed scheme, rsa key: ([\d,]+) us of keygate CPU per signed GET \(1 round\)$/.exec(deciding)?.[1]) > 0,
    `keygate's CPU per decision: ${deciding}`)
  t.ok(number(/^keygate inline \(d\), seed scheme, rsa key: ([\d,]+) us of keygate CPU per signed GET \(1 round\)$/.exec(inline)?.[1]) > 0,
    `keygate's CPU per inline request: ${inline}`)
  t.ok(number(/^keygate CPU h \/ d, deciding over inline: ([\d.]+)x \(1 round\)$/.exec(cpuRatio)?.[1]) > 0, `h / d: ${cpuRatio}`)
  const nginxUs = /^nginx CPU per request: ([\d,]+) us alone \(g\), ([\d,]+) us asking keygate \(h\)$/.exec(nginxCpu)
  t.ok(nginxUs !== null && number(nginxUs[1]) > 0 && number(nginxUs[2]) > 0, `nginx's CPU per request: ${nginxCpu}`)
  const allowed = /^decisions: ([\d,]+) allowed \(2xx\), ([\d,]+) not \(medians per round\)$/.exec(decisions)
  t.ok(allowed !== null && number(allowed[1]) > 0, `decisions allowed: ${decisions}`)
  t.equal(allowed?.[2], '0', 'no decision refused')
  t.match(machine, /^machine: \d+ cores \(/)
  t.notOk(lines.some((line) => /^(auth layer|per gateway core),/.test(line)), 'not the two figures of the other scenarios, which it cannot give')

  // the JSON: the same figures, and no non-2xx answer anywhere
  const jsonPath = /^JSON: (.+)$/m.exec(run.stdout)?.[1]
  const report = JSON.parse(readFileSync(jsonPath as string, 'utf8')) as BenchReport
  t.same(report.configs.map((c) => c.id), ['d', 'g', 'h'])
  for (const c of report.configs) {
    t.equal(c.median.non2xx, 0, `${c.id}: no non-2xx answer: ${JSON.stringify(c.median.statuses)}`)
    t.ok((c.median.statuses['200'] ?? 0) > 0, `${c.id}: 200s`)
    t.ok((c.median.cpuPerRequestUs ?? 0) > 0, `${c.id}: CPU per request (${c.cpuOf})`)
  }
  t.match(report.configs.map((c) => c.cpuOf), ['keygate', 'nginx', /^keygate/])
  const decision = report.decision
  t.ok(decision, 'the decision figures')
  if (decision === undefined) return
  t.match(decision, { scheme: 'seed', keyType: 'rsa' })
  for (const [name, value] of Object.entries(decision.rps)) t.ok((value ?? 0) > 0, `req/s of ${name}: ${value}`)
  t.equal(decision.rps.decision, report.configs.find((c) => c.id === 'h')?.median.rps, 'h\'s req/s, as in its row')
  positive(t, decision.decisionToNginx, 'h / g')
  positive(t, decision.inlineToNginx, 'd / g')
  positive(t, decision.keygateCpuUs.decision, 'keygate CPU deciding')
  positive(t, decision.keygateCpuUs.inline, 'keygate CPU inline')
  positive(t, decision.decisionToInlineCpu, 'keygate CPU h / d')
  t.ok((decision.nginxCpuUs.alone ?? 0) > 0 && (decision.nginxCpuUs.decision ?? 0) > 0, `nginx CPU: ${JSON.stringify(decision.nginxCpuUs)}`)
  t.ok((decision.decisions?.allowed ?? 0) > 0, 'decisions allowed')
  t.equal(decision.decisions?.notAllowed, 0, 'none refused')
  t.match(report.figures.authLayerCpuUs, { value: null, why: /^--scenario decision gives its own figures/ })
  t.same(report.warnings.filter((w) => /non-2xx|connection errors/.test(w)), [], 'no warning about the answers')

  // nginx and the keygates are gone
  t.same(report.services.map((s) => s.name).sort(), ['example service', 'keygate (d)', 'keygate (h)', 'nginx'])
  for (const s of report.services) t.notOk(alive(s.pid), `${s.name} (pid ${s.pid}) is stopped`)
})

t.test('--scenario decision without nginx: how to install it; g and h belong to it', async (t) => {
  // three refusals before anything starts: run side by side
  const [missing, other, alone] = await Promise.all([
    bench(['--scenario', 'decision', '--nginx', '/nonexistent/nginx']),
    bench(['--scenario', 'decision', '--only', 'c,h']),
    bench(['--only', 'g'])
  ])
  t.equal(missing.code, 1)
  t.match(missing.stderr, /--scenario decision needs nginx \(g, h\), and there is none at \/nonexistent\/nginx: install it \(Debian, Ubuntu: apt-get install nginx-light/)
  t.match(missing.stderr, /--only d/, 'or keygate inline alone')
  t.equal(other.code, 2)
  t.match(other.stderr, /--scenario decision: runs d, g, h only; leave out c/)
  t.equal(alone.code, 2)
  t.match(alone.stderr, /--only: g and h \(nginx\) are --scenario decision's/)
})
