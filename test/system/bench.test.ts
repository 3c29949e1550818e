// `npm run bench` end to end with tiny settings: it starts the five configurations, loads each,
// opens with the two figures it answers (and the machine), prints the comparison table, writes
// JSON and HTML reports, and leaves no process or Redis key.
import { readdirSync, readFileSync } from 'node:fs'
import { availableParallelism, cpus } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import type { BenchReport, Figure, NoFigure } from '../../bench/report.js'
import { TINY, alive, keysUnder, outDir, runBench, type BenchRun } from '../helpers/bench.js'
import { testRedisUrl } from '../helpers/redis.js'

const bench = runBench

/** the figure, asserted to be one */
function measured (t: Test, figure: Figure | NoFigure, name: string): Figure {
  t.not(figure.value, null, `${name} is measured${figure.value === null ? `: ${figure.why}` : ''}`)
  return figure as Figure
}

/** the number that follows `prefix` at the start of `line`, "1,234" read as 1234 */
function numberAfter (line: string, prefix: string): number {
  return line.startsWith(prefix) ? Number((line.slice(prefix.length).split(' ')[0] ?? '').replace(/,/g, '')) : NaN
}

t.test('with no target: the five configurations, a table, JSON and HTML, nothing left behind', async (t) => {
  const redisUrl = await testRedisUrl()
  const out = outDir(t)
  const run = await bench([...TINY, '--out', out], { REDIS_URL: redisUrl })
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)

  // the table: a header, then one row per configuration with its req/s and non-2xx
  const lines = run.stdout.split('\n')
  const header = lines.findIndex((line) => line.startsWith('config'))
  t.ok(header >= 0, 'a table header')
  const columns = (lines[header] ?? '').split(/\s{2,}/)
  t.same(columns.slice(0, 2), ['config', 'req/s'])
  const nonOk = columns.indexOf('non-2xx')
  const cpuColumn = columns.indexOf('CPU us/req')
  const tableCpu: Record<string, number> = {}
  for (const [id, label] of [
    ['a', 'example service direct'],
    ['b', 'fastify + http-proxy, no auth'],
    ['c', 'keygate, Redis store'],
    ['d', 'keygate, embedded store'],
    ['e', 'keygate, public route (no auth)']
  ] as const) {
    const row = lines.find((line) => line.startsWith(`${id}  ${label}`))
    t.ok(row, `a row for ${id}`)
    const cells = (row ?? '').slice(`${id}  ${label}`.length).trim().split(/\s{2,}/)
    t.ok(Number((cells[0] ?? '').replace(/,/g, '')) > 0, `${id}: non-zero req/s (${cells[0]})`)
    t.equal(cells[nonOk - 1], '0', `${id}: no non-2xx response`)
    tableCpu[id] = Number((cells[cpuColumn - 1] ?? '').replace(/,/g, ''))
  }

  // the first lines: the two figures, for the run's scheme and key type, from the table's c and e;
  // then the machine, how busy it was, and how the figures are computed
  const title = lines.findIndex((line) => line.startsWith('keygate bench: scenario get, seed scheme, rsa key, '))
  t.equal(title, 1, 'the title, first')
  const authPrefix = 'auth layer, seed scheme, rsa key: '
  const corePrefix = 'per gateway core, seed scheme, rsa key: '
  const [authLine = '', coreLine = '', machineLine = '', authHow = '', coreHow = ''] = lines.slice(title + 1, title + 6)
  const c = tableCpu.c as number
  const e = tableCpu.e as number
  const printedAuth = numberAfter(authLine, authPrefix)
  // a difference of two measured figures: on a busy moment c may measure below e, so its sign is
  // noise here; what is checked is that it is printed, and is c - e
  t.ok(Number.isFinite(printedAuth), `the auth layer's cost, in the first lines: ${authLine}`)
  t.match(authLine, / us of gateway CPU per signed request \(1 round\)$/)
  // the table shows whole microseconds: c - e from it is within 1 of the figure
  t.ok(Math.abs(printedAuth - (c - e)) <= 1, `it is c - e of the table: ${printedAuth} against ${c} - ${e}`)
  const printedCore = numberAfter(coreLine, corePrefix)
  t.ok(printedCore > 0, `signed requests per second per core, in the first lines: ${coreLine}`)
  t.match(coreLine, / signed requests\/s \(1 round\)$/)
  t.ok(printedCore >= Math.floor(1e6 / (c + 0.5)) && printedCore <= Math.ceil(1e6 / (c - 0.5)),
    `it is 1,000,000 / c's CPU us/req of the table: ${printedCore} against 1,000,000 / ${c}`)
  t.ok(machineLine.includes(`${availableParallelism()} cores (${cpus()[0]?.model.trim() ?? ''}), Node ${process.version}, `),
    `the machine, in the first lines: ${machineLine}`)
  t.match(machineLine, /; load average \d+\.\d\d at the start, \d+\.\d\d at the end \(1 minute\); other work used \d+% of a core during the measurements/)
  t.ok(authHow.startsWith('how: auth layer = c\'s CPU us/req - e\'s'), `how the auth layer's cost is computed: ${authHow}`)
  t.ok(coreHow.startsWith('how: per gateway core = 1,000,000 / c\'s CPU us/req'), `how the per-core figure is computed: ${coreHow}`)

  // the JSON report
  const jsonPath = /^JSON: (.+)$/m.exec(run.stdout)?.[1]
  t.ok(jsonPath, 'the JSON path is printed')
  const report = JSON.parse(readFileSync(jsonPath as string, 'utf8')) as BenchReport
  t.equal(report.tool, 'keygate-bench')
  t.same(Object.keys(report).slice(2, 4), ['figures', 'machine'], 'the JSON opens with the figures and the machine')
  t.match(report.options, { scenario: 'get', duration: 1, warmup: 0, rounds: 1, connections: 4 })
  t.same(report.configs.map((c) => c.id), ['a', 'b', 'c', 'd', 'e'])
  for (const c of report.configs) {
    t.equal(c.rounds.length, 1, `${c.id}: one round`)
    t.ok(c.median.rps > 0, `${c.id}: req/s`)
    t.equal(c.median.non2xx, 0, `${c.id}: no non-2xx`)
    t.ok((c.median.statuses['200'] ?? 0) > 0, `${c.id}: 200s`)
    const { p50 = 0, p99 = 0, p100 = 0 } = c.median.latency
    t.ok(p50 > 0 && p50 <= p99 && p99 <= p100, `${c.id}: latency percentiles, in order (${p50} <= ${p99} <= ${p100} ms)`)
    t.ok((c.median.cpuPerRequestUs ?? 0) > 0, `${c.id}: CPU per request`)
    t.equal(c.rounds[0]?.perSecond.reduce((a, b) => a + b, 0), c.rounds[0]?.requests, `${c.id}: the requests per second over time add up to the requests`)
    if (c.id !== 'a') t.ok((c.median.upstreamCpuPerRequestUs ?? 0) > 0, `${c.id}: upstream CPU per request`)
  }
  t.equal(report.configs.find((c) => c.id === 'b')?.median.ratioToBare, 1)
  t.ok((report.configs.find((c) => c.id === 'c')?.median.ratioToBare ?? 0) > 0, 'c: a ratio to b')

  // the JSON's figures: from c's and e's CPU per request in the same report, as printed
  const [cReport, eReport] = (['c', 'e'] as const).map((id) => report.configs.find((config) => config.id === id))
  const cCpu = cReport?.median.cpuPerRequestUs ?? NaN
  const eCpu = eReport?.median.cpuPerRequestUs ?? NaN
  t.match(report.figures, { scheme: 'seed', keyType: 'rsa' })
  const auth = measured(t, report.figures.authLayerCpuUs, 'the auth layer\'s cost')
  t.ok(Number.isFinite(auth.value), `the auth layer's cost is a number: ${auth.value} us`)
  t.ok(Math.abs(auth.value - (cCpu - eCpu)) < 0.06, `the auth layer is c - e: ${auth.value} against ${cCpu} - ${eCpu}`)
  t.same(auth.perRound, [Math.round(((cReport?.rounds[0]?.cpuPerRequestUs ?? NaN) - (eReport?.rounds[0]?.cpuPerRequestUs ?? NaN)) * 10) / 10],
    'its range: c - e in each round')
  t.same([auth.min, auth.max], [auth.perRound[0], auth.perRound[0]], 'one round: the range is that round\'s')
  t.equal(Math.round(auth.value), printedAuth, 'the figure printed')
  t.match(auth.how, /^c's CPU us\/req - e's/)
  const perCore = measured(t, report.figures.signedRequestsPerSecondPerCore, 'signed requests per second per core')
  t.equal(perCore.value, Math.round(1e6 / cCpu), `signed requests per second per core: 1,000,000 / ${cCpu} us`)
  t.same(perCore.perRound, [Math.round(1e6 / (cReport?.rounds[0]?.cpuPerRequestUs ?? NaN))], 'its range: the same in each round')
  t.equal(perCore.value, printedCore, 'the figure printed')
  t.match(perCore.how, /^1,000,000 \/ c's CPU us\/req/)
  t.match(report.machine, {
    cpus: availableParallelism(), cpuModel: cpus()[0]?.model.trim() ?? '', node: process.version, platform: `${process.platform}-${process.arch}`
  }, 'the machine')
  for (const at of ['start', 'end'] as const) {
    const load = report.machine.loadAverage[at]
    t.ok(load.length === 3 && load.every((v) => v >= 0), `the load average at the ${at}: ${load.join(', ')}`)
  }
  const others = report.configs.map((config) => config.rounds[0]?.otherCpuPercent ?? NaN).sort((x, y) => x - y)
  t.same(report.machine.otherCpuPercent, { median: others[2], max: others[4] }, 'other work\'s CPU: the median and highest of the measurements\'')

  // the HTML report opens with the same lines, with its charts inline
  const html = readFileSync(report.files.html, 'utf8')
  const top = html.slice(0, html.indexOf('<table>'))
  const escape = (text: string): string => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;')
  for (const line of [authLine, coreLine, machineLine, authHow, coreHow]) {
    t.ok(top.includes(escape(line)), `the HTML opens with: ${line}`)
  }
  t.equal((html.match(/<svg /g) ?? []).length, 2, 'two inline SVG charts')

  // nothing left behind
  t.equal(report.services.length, 5, 'five processes were started')
  for (const service of report.services) t.notOk(alive(service.pid), `${service.name} (pid ${service.pid}) is gone`)
  const prefix = report.options.redisPrefix
  t.type(prefix, 'string')
  t.same(await keysUnder(redisUrl, prefix as string), [], 'no Redis key left under the run\'s prefix')
})

t.test('signed POSTs: each signed once per store, none refused as a replay, on both stores and with an IdP\'s token (i)', async (t) => {
  const redisUrl = await testRedisUrl()
  const run = await bench([...TINY, '--scenario', 'post', '--only', 'c,d,i', '--json', '--out', outDir(t)], { REDIS_URL: redisUrl })
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const report = JSON.parse(run.stdout) as BenchReport
  t.same(report.configs.map((c) => c.id), ['c', 'd', 'i'])
  for (const c of report.configs) {
    t.ok((c.median.statuses['201'] ?? 0) > 0, `${c.id}: clients created`)
    t.equal(c.median.non2xx, 0, `${c.id}: no replay refusals or conflicts: ${JSON.stringify(c.median.statuses)}`)
    t.equal(c.median.ratioToBare, null, `${c.id}: no ratio without b`)
  }
  // (i): the same signed POSTs with the bench's IdP's token, a key registered with it: what that costs over keygate's own (c)
  t.equal(report.configs.find((c) => c.id === 'i')?.label, 'keygate, Redis store, an IdP\'s token')
  const idp = report.figures.idpToken
  t.ok(idp !== undefined, 'the IdP token\'s figures are in the JSON')
  const extra = measured(t, idp?.extraCpuUs ?? { value: null, why: 'absent' }, 'an IdP token\'s cost over keygate\'s own')
  const [cCpu, iCpu] = (['c', 'i'] as const).map((id) => report.configs.find((c) => c.id === id)?.median.cpuPerRequestUs ?? NaN)
  t.ok(Math.abs(extra.value - ((iCpu ?? NaN) - (cCpu ?? NaN))) < 0.06, `it is i - c: ${extra.value} against ${iCpu} - ${cCpu}`)
  t.match(extra.how, /^i's CPU us\/req - c's/)
  t.ok((idp?.uncachedVerificationUs ?? 0) > 0, `verifying an IdP token not seen before, measured: ${idp?.uncachedVerificationUs} us`)
  for (const service of report.services) t.notOk(alive(service.pid), `${service.name} (pid ${service.pid}) is gone`)
})

t.test('(j): GETs signed by a Web Bot Auth agent, its key pinned, beside the same GETs by a registered key (c), RFC 9421 and Ed25519 both', async (t) => {
  const redisUrl = await testRedisUrl()
  const run = await bench([...TINY, '--only', 'c,j', '--out', outDir(t)], { REDIS_URL: redisUrl })
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const lines = run.stdout.split('\n')
  t.ok(lines.some((line) => line.startsWith('keygate bench: scenario get, rfc9421 scheme, ed25519 key, ')), 'with j, the run signs RFC 9421 with Ed25519')
  const jsonPath = /^JSON: (.+)$/m.exec(run.stdout)?.[1]
  const report = JSON.parse(readFileSync(jsonPath as string, 'utf8')) as BenchReport
  t.same(report.configs.map((c) => c.id), ['c', 'j'])
  t.match(report.figures, { scheme: 'rfc9421', keyType: 'ed25519' })
  const j = report.configs.find((c) => c.id === 'j')
  t.equal(j?.label, 'keygate, Redis store, a signed agent')
  // every agent signature is good for one request: a repeat would be 401 REPLAYED_REQUEST
  t.ok((j?.median.statuses['200'] ?? 0) > 0, `j: GETs answered 200: ${JSON.stringify(j?.median.statuses)}`)
  t.equal(j?.median.non2xx, 0, `j: every request 2xx, none refused as a replay: ${JSON.stringify(j?.median.codes)}`)
  t.equal(j?.rounds[0]?.inlineSignedPosts, 0, 'j: every agent GET signed ahead')
  const agent = report.figures.agentSignature
  t.ok(agent !== undefined, 'the signed agent\'s figures are in the JSON')
  const extra = measured(t, agent?.extraCpuUs ?? { value: null, why: 'absent' }, 'an agent\'s signature over a registered key\'s')
  const [cCpu, jCpu] = (['c', 'j'] as const).map((id) => report.configs.find((c) => c.id === id)?.median.cpuPerRequestUs ?? NaN)
  t.ok(Math.abs(extra.value - ((jCpu ?? NaN) - (cCpu ?? NaN))) < 0.06, `it is j - c: ${extra.value} against ${jCpu} - ${cCpu}`)
  t.match(extra.how, /^j's CPU us\/req - c's/)
  t.ok(agent?.extraRedisCpuUs.value !== null, 'and j - c of Redis\'s CPU')
  // in the first lines, as the table has it (whole microseconds there), and how it is computed
  const cpuColumn = (lines.find((l) => l.startsWith('config')) ?? '').split(/\s{2,}/).indexOf('CPU us/req')
  const row = (id: 'c' | 'j'): number => {
    const start = `${id}  ${report.configs.find((c) => c.id === id)?.label ?? ''}`
    const cells = (lines.find((l) => l.startsWith(start)) ?? '').slice(start.length).trim().split(/\s{2,}/)
    return Number((cells[cpuColumn - 1] ?? '').replace(/,/g, ''))
  }
  const prefix = 'a signed agent (j) over a registered key (c), RFC 9421 Ed25519 GETs: '
  const printed = numberAfter(lines.find((line) => line.startsWith(prefix)) ?? '', prefix)
  t.ok(Math.abs(printed - (row('j') - row('c'))) <= 1, `the first lines: j - c of the table: ${printed} against ${row('j')} - ${row('c')}`)
  t.ok(lines.some((line) => line.startsWith('how: signed agent = j\'s CPU us/req - c\'s')), 'how it is computed')
  for (const service of report.services) t.notOk(alive(service.pid), `${service.name} (pid ${service.pid}) is gone`)
  t.same(await keysUnder(redisUrl, report.options.redisPrefix as string), [], 'no Redis key left under the run\'s prefix')
})

t.test('(j) sends agent-signed GETs: scenarios and signatures that are not its own are refused', async (t) => {
  for (const scenario of ['token', 'register', 'post']) {
    const bad = await bench(['--scenario', scenario, '--only', 'c,j'])
    t.equal(bad.code, 2, `--scenario ${scenario}`)
    t.match(bad.stderr, new RegExp(`--scenario ${scenario}: j sends GETs signed by a Web Bot Auth agent .*run j with --scenario get`))
  }
  const rsa = await bench(['--only', 'c,j', '--key', 'rsa'])
  t.equal(rsa.code, 2)
  t.match(rsa.stderr, /--only \.\.\.,j: j's agent signs RFC 9421 with an Ed25519 key, .*--scheme rfc9421 --key ed25519/)
})

t.test('(i) takes an IdP\'s token: --scenario token, a password login, cannot run it', async (t) => {
  const bad = await bench(['--scenario', 'token', '--only', 'c,i'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--scenario token: logs in with a password at POST \/v1\/auth\/token; i's token is an identity provider's: leave i out/)
})

t.test('--help prints the usage; a bad flag is a usage error', async (t) => {
  const help = await bench(['--help'])
  t.equal(help.code, 0)
  t.match(help.stdout, /^Usage: npm run bench/)
  t.match(help.stdout, /--scenario NAME/)
  const bad = await bench(['--scenario', 'nope'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--scenario: "nope" is not one of get, post, token, register, mix, reject/)
})

t.test('--rate half: (b) runs flat out first, then every configuration at half its peak', async (t) => {
  const out = outDir(t)
  const run = await bench([...TINY, '--duration', '2', '--rate', 'half', '--only', 'b,d', '--json', '--cpu-prof', '--out', out])
  t.equal(run.code, 0, `exit 0\n${run.stderr}`)
  const report = JSON.parse(run.stdout) as BenchReport
  const peak = report.options.barePeakRps as number
  const rate = report.options.rate as number
  t.ok(peak > 0, 'the peak of b is in the report')
  t.equal(rate, Math.round(peak / 2), 'the fixed rate is half of it')
  const duration = report.options.duration as number
  for (const c of report.configs) {
    // a fixed rate is a ceiling: no configuration is driven faster than it, with 1 s of slack for
    // autocannon's ticks (a 2 s measurement may hold 3 s of them: at low rates, one tick is a
    // tenth of the rate and more); flat out, (b) ran at twice the rate
    const ceiling = rate * (duration + 1) / duration
    t.ok(c.median.rps <= ceiling, `${c.id}: ${c.median.rps} req/s is held at about ${rate} (at most ${ceiling})`)
    t.ok(ceiling < peak, 'the ceiling is below the peak: the check tells a fixed rate from flat out')
    t.equal(c.median.non2xx, 0, `${c.id}: every request answered 2xx`)
  }
  // --cpu-prof: a V8 profile of each proxy process (b and d here), main thread and all
  const profileDirs = readdirSync(out).filter((name) => name.startsWith('profiles-'))
  t.equal(profileDirs.length, 1, 'one folder of CPU profiles')
  const profiles = readdirSync(join(out, profileDirs[0] as string)).filter((name) => name.endsWith('.cpuprofile'))
  const pids = new Set(profiles.map((name) => name.split('.')[3]))
  t.equal(pids.size, 2, `a profile from each of the two proxies: ${profiles.join(', ')}`)
  const bad = await bench(['--rate', 'half', '--only', 'c,d'])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--rate half: needs configuration b/)
})

t.test('npm run keygate -- bench is the same tool: its usage, its exit codes', async (t) => {
  const run = async (args: string[]): Promise<BenchRun> => await runBench(args, {}, ['gateway/src/cli/keygate.ts', 'bench'])
  const help = await run(['--help'])
  t.equal(help.code, 0)
  t.match(help.stdout, /^Usage: npm run bench/)
  const bad = await run(['--rounds', 'zero'])
  t.equal(bad.code, 2, 'a usage error keeps its exit code through the CLI')
  t.match(bad.stderr, /--rounds: "zero" is not an integer/)
})
