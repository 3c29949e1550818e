// `npm run bench -- --scheme rfc9421 --key ed25519` and the other pairs: the load is signed in
// the scheme and with the key type asked for, and keygate accepts every request of it (a request
// signed wrong would show as a 401 in the statuses). The figures of docs/scaling.md#signature-schemes
// come from these options. A file of its own: with the others, bench.test.ts would outlast tap's
// per-file timeout.
import t from 'tap'
import type { BenchReport } from '../../bench/report.js'
import { TINY, outDir, runBench as bench } from '../helpers/bench.js'

const PAIRS = [['rfc9421', 'rsa'], ['rfc9421', 'ed25519'], ['rfc9421', 'p256'], ['seed', 'ed25519'], ['seed', 'p256']] as const

for (const [scheme, key] of PAIRS) {
  t.test(`--scheme ${scheme} --key ${key}: signed GETs and POSTs, all accepted`, async (t) => {
    const run = await bench([...TINY, '--scenario', 'mix', '--scheme', scheme, '--key', key, '--only', 'd', '--json', '--out', outDir(t)])
    t.equal(run.code, 0, `exit 0\n${run.stderr}`)
    const report = JSON.parse(run.stdout) as BenchReport
    t.equal(report.options.scheme, scheme)
    t.equal(report.options.keyType, key)
    const d = report.configs[0]
    t.ok((d?.median.statuses['200'] ?? 0) > 0, `GETs answered 200: ${JSON.stringify(d?.median.statuses)}`)
    t.ok((d?.median.statuses['201'] ?? 0) > 0, `POSTs answered 201: ${JSON.stringify(d?.median.statuses)}`)
    t.equal(d?.median.non2xx, 0, `none refused: ${JSON.stringify(d?.median.statuses)}`)
    // the figures are for the scheme and key type of the run; here from d, keygate on the embedded store
    t.match(report.figures, { scheme, keyType: key })
    const cpu = d?.median.cpuPerRequestUs ?? NaN
    t.equal(report.figures.signedRequestsPerSecondPerCore.value, Math.round(1e6 / cpu), `signed requests per second per core: 1,000,000 / ${cpu} us`)
  })
}

t.test('--scheme and --key refuse what they do not know', async (t) => {
  const scheme = await bench(['--scheme', 'cavage'])
  t.equal(scheme.code, 2)
  t.match(scheme.stderr, /--scheme: "cavage" is not one of seed, rfc9421/)
  const key = await bench(['--key', 'dsa'])
  t.equal(key.code, 2)
  t.match(key.stderr, /--key: "dsa" is not one of rsa, ed25519, p256/)
})
