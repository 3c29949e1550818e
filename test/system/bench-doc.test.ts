// docs/bench.md, "The benchmark": each command of the block, in its cheapest faithful form. A
// full run takes minutes per command, so only `npm run bench -- --help` runs here as written
// (with bash and npm); every other command's arguments, as bash expands them, are read by the
// bench's own parser (bench/args.ts, what npm run bench reads them with) and must mean what the
// block's comment says. The runs themselves, with tiny durations, are bench*.test.ts's:
// bench.test.ts (the comparison, --scenario post, --rate half, --cpu-prof), bench-scenarios
// (reject, --reject-kind), bench-flood (flood, --env), bench-rate-limits (f), bench-schemes
// (--scheme rfc9421 --key), bench-workers (--workers), bench-decision (decision), bench-trace (--trace),
// bench-scenarios (mcp, dpop);
// (i) and (j) are bench.test.ts's. The prose's figures of "A default run" (and the one "Which
// figure to quote" cites) are checked against that run's table on the page: the run is not made
// again here (figures are never asserted from a run), only the page kept consistent with itself.
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { parseBenchArgs, USAGE } from '../../bench/args.js'
import { ROOT } from '../helpers/build.js'
import { docBlocks, docSection, docSnippet } from '../helpers/docs.js'

const run = promisify(execFile)
const block = docSnippet('docs/bench.md', 'The benchmark', 'sh')
const PW = 'a password of alice'

/** each `npm run bench -- ...` of the block, its arguments as bash passes them */
async function commands (): Promise<string[][]> {
  const recorder = `
npm () {
  [ "$1 $2 $3" = 'run bench --' ] || [ "$*" = 'run bench' ] || { echo "not npm run bench: $*" >&2; return 1; }
  shift 2; [ "$1" = -- ] && shift
  [ $# -gt 0 ] && printf '%s\\0' "$@"; printf '\\n'
}
`
  const { stdout } = await run('bash', ['-c', recorder + block], { env: { PATH: process.env.PATH ?? '', PW } })
  return stdout.split('\n').slice(0, -1).map((line) => line.split('\0').slice(0, -1))
}

t.test('every command of the block is one the bench accepts, meaning what its comment says', async (t) => {
  const all = await commands()
  t.equal(all.length, block.split('\n').filter((line) => line.startsWith('npm run bench')).length, 'one per line')
  const options = all.map((args) => parseBenchArgs(args, '/nonexistent'))
  const [
    comparison, post, half, reject, rejectOne, flood, floodNoBudget, decision, mcp, dpop, withF, withI, withJ, rfc9421, workers, cpuProf, traced, target,
    help
  ] = options
  t.match(comparison, { scenario: 'get', only: ['a', 'b', 'c', 'd', 'e'], target: undefined }, 'the comparison')
  t.match(post, { scenario: 'post', rounds: 5 })
  t.match(half, { only: ['b', 'c', 'e'], rate: 'half' })
  t.match(reject, { scenario: 'reject', rejectShare: 0.5, rejectKind: 'all' })
  t.match(rejectOne, { scenario: 'reject', rejectShare: 1, rejectKind: 'bad-signature' })
  t.match(flood, { scenario: 'flood', only: ['c'] })
  t.match(floodNoBudget, { scenario: 'flood', only: ['c'], gatewayEnv: { KEYGATE_SIGNATURE_FAILURE_LIMIT: '1000000000' } })
  t.match(decision, { scenario: 'decision', only: ['d', 'g', 'h'] }, 'nginx alone, nginx asking keygate, keygate inline')
  t.match(mcp, { scenario: 'mcp', only: ['e', 'k'] }, 'tools/calls on a public route and on a public MCP route')
  t.match(dpop, { scenario: 'dpop', only: ['l', 'm', 'n'] }, 'a token as Bearer, bound with ES256 proofs, bound with EdDSA proofs')
  t.match(withF, { only: ['c', 'f'] })
  t.match(withI, { only: ['c', 'e', 'i'] }, '(i): an identity provider\'s token, beside c and e')
  t.match(withJ, { scenario: 'get', only: ['c', 'e', 'j'], scheme: 'rfc9421', keyType: 'ed25519' },
    '(j): a signed agent\'s GETs, beside c and e, all signing RFC 9421 with Ed25519 without being told')
  t.match(rfc9421, { only: ['c'], scheme: 'rfc9421', keyType: 'ed25519' })
  t.match(workers, { workers: 2, warmup: 5 })
  t.match(cpuProf, { only: ['c'], cpuProf: true })
  t.match(traced, { only: ['c', 'e'], trace: 0.01 })
  t.match(target, { target: { url: 'http://gw:8080', user: 'alice', password: PW } }, '"$PW" is the password')
  t.equal(help, null, '--help: the usage, no run')
})

t.test('npm run bench -- --help, as written: every flag the block uses', async (t) => {
  const line = block.split('\n').find((l) => l.startsWith('npm run bench -- --help')) ?? ''
  const { stdout } = await run('bash', ['-c', line], { cwd: ROOT, env: { PATH: process.env.PATH ?? '' } })
  t.equal(stdout.trim().split('\n').at(-1)?.trim(), USAGE.trim().split('\n').at(-1)?.trim(), 'the usage')
  const flags = new Set(block.match(/--[a-z][a-z-]+/g))
  for (const flag of flags) t.match(stdout, flag, `--help lists ${flag}`)
})

/** A configuration's row of a bench table as the page shows it: its columns by their header's names. */
function tableRows (table: string): Map<string, Record<string, string>> {
  const [header = '', , ...rows] = table.trimEnd().split('\n')
  const names = header.split(/ {2,}/)
  return new Map(rows.map((row) => {
    // the id and the label are one column, "c  keygate, Redis store", the only two-space gap inside one
    const [id = '', label = '', ...values] = row.split(/ {2,}/)
    return [id, Object.fromEntries([[names[0] as string, label], ...values.map((value, i) => [names[i + 1] as string, value])])]
  }))
}

t.test('the prose of "A default run" and "Which figure to quote" follows the run\'s table', async (t) => {
  const section = docSection('docs/bench.md', 'A default run')
  const [table = ''] = docBlocks('docs/bench.md', 'A default run', '')
  const rows = tableRows(table)
  t.same([...rows.keys()], ['a', 'b', 'c', 'd', 'e'], 'the comparison\'s five configurations')
  const cpu = (id: string): number => Number(rows.get(id)?.['CPU us/req'])
  const [b, c, d, e] = ['b', 'c', 'd', 'e'].map(cpu) as [number, number, number, number]
  t.ok([b, c, d, e].every((us) => us > 0), `CPU us/req of b, c, d, e: ${b}, ${c}, ${d}, ${e}`)
  const measured = rows.get('c')?.['req/s'] ?? ''
  const perCore = Math.round(1e6 / c).toLocaleString('en-US')

  // the prose's words, whatever its line breaks
  const prose = section.replace(/\s+/g, ' ')
  t.match(prose, `would read ${c - e} us (${c} - ${e}) and ${perCore} signed requests/s (1,000,000 / ${c}), against (c)'s measured ${measured} req/s`,
    'the two figures, from c and e, beside c\'s measured rate')
  t.match(docSection('docs/bench.md', 'The benchmark').replace(/\s+/g, ' '), `(${perCore} from CPU time, ${measured} measured)`,
    '"Which figure to quote" cites the same two')
  const lessThanB = Math.round((b - e) / b * 100)
  t.match(prose, `keygate's proxy hop (e) costs ${e} us of CPU a request here, ${lessThanB}% less than @fastify/http-proxy's (b) ${b} us`,
    `(e) against (b): ${e} us against ${b}, ${lessThanB}% less`)
  const authLayer = [c - e, d - e].sort((x, y) => x - y)
  t.match(prose, `The auth layer (c - e) costs ${authLayer.join('-')} us a request in the latest runs (c and d against e here)`)
  const [low, high] = /forwards at ([\d.]+)-([\d.]+)x the bare proxy's rate/.exec(prose)?.slice(1).map(Number) ?? []
  const cOverB = Number(rows.get('c')?.['x (b)'])
  t.ok(low !== undefined && high !== undefined && low <= cOverB && cOverB <= high, `the range of the latest runs (${low}-${high}x) holds c's ${cOverB}x`)
  const [bLow, bHigh] = /\(b\) itself swings between (\d+) and (\d+) us/.exec(prose)?.slice(1).map(Number) ?? []
  t.ok(bLow !== undefined && bHigh !== undefined && bLow <= b && b <= bHigh, `(b)'s swing (${bLow}-${bHigh} us) holds this run's ${b}`)
})
