// `npm run bench -- --scheme rfc9421 --key ed25519` and the other pairs: the load is signed in
// the scheme and with the key type asked for, and keygate accepts every request of it (a request
// signed wrong would show as a 401 in the statuses). The figures of docs/scaling.md#signature-schemes
// come from these options. A file of its own: with the others, bench.test.ts would outlast tap's
// per-file timeout.
// Every pair: the requests the bench's own code signs (its signing pool, as the bench sets it up
// for the pair) sent to a real keygate here, in this process (a whole bench run per pair would cost
// seconds each). The flags themselves: one whole run, with the pair whose signatures differ most
// from the defaults' (RFC 9421, an ECDSA key, whose signatures are raw r||s rather than DER).
import type autocannon from 'autocannon'
import t from 'tap'
import type { BenchReport } from '../../bench/report.js'
import {
  buildRequests, CLIENTS_PATH, createSignedMaterial, ensurePosts, type Destination
} from '../../bench/scenarios.js'
import { encodingOf, generateBenchKey, signOne, SigningPool } from '../../bench/signing.js'
import { TINY, outDir, runBench as bench } from '../helpers/bench.js'
import { send } from '../helpers/http.js'
import { addUser, login, startStack } from '../helpers/stack.js'

const PAIRS = [['rfc9421', 'rsa'], ['rfc9421', 'ed25519'], ['rfc9421', 'p256'], ['seed', 'ed25519'], ['seed', 'p256']] as const

t.test('every --scheme and --key pair: the mix the bench signs, GETs and POSTs, all accepted by keygate', async (t) => {
  const gateway = await startStack(t, { store: 'memory' })
  await addUser(gateway, 'bench')
  for (const [scheme, keyType] of PAIRS) {
    // as bench/cli.ts sets up a run of the pair: a key of the type, registered; a pool signing in the scheme's encoding
    const key = await generateBenchKey(keyType)
    const token = await login(gateway.url, 'bench')
    const name = `bench-${scheme}-${keyType}`
    const registered = await send(gateway.url, '/v1/api-keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name, publicKey: key.publicPem, signature: signOne(key, name) })
    })
    t.equal(registered.status, 201, `${scheme} ${keyType}: the key registered: ${registered.text}`)
    const pool = new SigningPool(key, encodingOf(scheme))
    t.teardown(async () => { await pool.close() })
    const material = await createSignedMaterial(key, scheme, pool)
    const destination: Destination = { kind: 'keygate', token, identityUser: undefined, credentials: undefined, postCursor: 0 }
    const requests = buildRequests('mix', destination, material, 0)
    await ensurePosts(material, pool, destination, requests.filter((request) => request.setupRequest !== undefined).length)

    const statuses: Record<string, number> = {}
    const schemesSent = new Set<string>()
    for (const template of requests) {
      const request = prepared(template)
      const headers = (request.headers ?? {}) as Record<string, string>
      schemesSent.add(['signature-input' in headers && 'rfc9421', 'x-api-signature' in headers && 'seed'].filter(Boolean).join(' and '))
      const res = await send(gateway.url, request.path ?? CLIENTS_PATH, {
        method: request.method ?? 'GET', headers, ...(typeof request.body === 'string' && { body: request.body })
      })
      statuses[res.status] = (statuses[res.status] ?? 0) + 1
    }
    const posts = requests.length - material.gets.length
    t.ok(posts > 0, `${scheme} ${keyType}: the mix has POSTs`)
    t.same(statuses, { 200: material.gets.length, 201: posts }, `${scheme} ${keyType}: every GET 200, every POST 201`)
    t.same([...schemesSent], [scheme], `${scheme} ${keyType}: every request carries the scheme's headers, and no other's`)
    t.equal(material.inlineSigned, 0, `${scheme} ${keyType}: every POST signed ahead by the pool, none one by one`)
  }
})

/** the request as autocannon sends it: the bench's POSTs are filled in by their setupRequest, one fresh POST each */
function prepared (template: autocannon.Request): autocannon.Request {
  const setup = template.setupRequest
  if (typeof setup === 'string') throw new Error('a setupRequest file: not how the bench builds its requests')
  return setup?.({ ...template }, {}) ?? template
}

t.test('--scheme rfc9421 --key p256: a whole run signs its load so, all accepted', async (t) => {
  const [scheme, key] = ['rfc9421', 'p256'] as const
  // from the sources, as npm run bench runs it (the other bench tests run it compiled): its children under tsx too
  const run = await bench([...TINY, '--scenario', 'mix', '--scheme', scheme, '--key', key, '--only', 'd', '--json', '--out', outDir(t)], {}, ['bench/cli.ts'])
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

t.test('--scheme and --key refuse what they do not know', async (t) => {
  const scheme = await bench(['--scheme', 'cavage'])
  t.equal(scheme.code, 2)
  t.match(scheme.stderr, /--scheme: "cavage" is not one of seed, rfc9421/)
  const key = await bench(['--key', 'dsa'])
  t.equal(key.code, 2)
  t.match(key.stderr, /--key: "dsa" is not one of rsa, ed25519, p256/)
})
