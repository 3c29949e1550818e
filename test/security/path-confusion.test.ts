// Path confusion: targets that a URL parser, a proxy and an upstream could each read as a different
// path. Three routes, each to its own recording upstream: /a/ (public), /b/ (signed) and /c/
// (public, rewritten to /internal/). Every target is sent three times: with no credentials, with a
// bearer token only, and correctly signed over the raw target. Each answer must be a 4xx, or a
// 2xx where the upstream of the route whose prefix matches the RAW path (case-sensitive, no
// decoding) received the target byte for byte (for /c/: with /c/ replaced by /internal/).
import t from 'tap'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { startRecorder, type Recorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { addUser, login, registerKey, startTestGateway, testConfig } from '../helpers/stack.js'
import { exchange, Tally, uniqueTimestamp } from '../helpers/security.js'

/** The cases the brief names, then neighbours of each. Raw bytes, sent as they are. */
const TARGETS = [
  // ..
  '/a/../b/x', '/a/..', '/b/../a/x', '/c/../b/x', '/a/x/../../b/x', '/a/../b/',
  // %2e%2e, %2E%2e
  '/a/%2e%2e/b/x', '/a/%2e%2e/b/', '/a/%2E%2e/b/x', '/a/%2E%2E/b/x', '/c/%2e%2e/b/x', '/a/%2e%2e%2fb/x', '/a/.%2e/b/x',
  // %2f
  '/a%2fb/x', '/a/..%2fb/', '/a/..%2fb/x', '/b%2f..%2fa/x', '/a/x%2fy', '/a/x%2F..%2F..%2Fb%2Fx',
  // %5c
  '/a/..%5cb/x', '/a%5c..%5cb/x', '/a/x%5cy', '/a/x%5c..%5c..%5cb/x', '/a\\..\\b/x',
  // //
  '//b/x', '//a/x', '/a//b/x', '/a//../b/x', '/c//x', '///b/x',
  // ;
  '/a;/b/', '/a;/b/x', '/a/;/../b/x', '/a/..;/b/x', '/a/x;y', '/b;/x', '/a/x;/../../b/x',
  // #
  '/a/#/../b/', '/a/x#frag', '/b/x#', '/a/%23/../b/x',
  // overlong UTF-8 and other decodings of "." and "/"
  '/a/%c0%ae%c0%ae/b/x', '/a/%c0%ae/b', '/a/%c0%af..%c0%afb/x', '/a/%e0%80%ae%e0%80%ae/b/x', '/a/%ef%bc%8e%ef%bc%8e/b/x',
  '/a/%252e%252e/b/x', '/a/%u002e%u002e/b/x',
  // case
  '/A/x', '/B/x', '/C/x', '/A/../b/x', '/b/X', '/a/X/../../B/x',
  // ./ segments
  '/a/./b', '/a/./b/x', '/a/%2e/b/x', '/./b/x', '/a/.',
  // NUL
  '/a/%00/x', '/b/%00', '/a/x%00/../../b/', '/a/%00/../b/x', '/a/\u0000/../b/x', '/b/x\u0000',
  // queries are not paths
  '/a/x?/../../b/', '/a/x?%2e%2e/b/', '/c/x?y=/../b/', '/c/', '/c/a/b?q=%2f..', '/b/x?../../a/',
  // no prefix at all
  '/c', '/b', '/ab/x', '/bb/x', 'http://gateway.test/b/x', '*'
]

const ROUTES = [
  { prefix: '/a/', name: 'A' },
  { prefix: '/b/', name: 'B' },
  { prefix: '/c/', name: 'C', rewrite: '/internal/' }
] as const
type RouteName = typeof ROUTES[number]['name']
type Variant = 'none' | 'bearer' | 'signed'
const VARIANTS: Variant[] = ['none', 'bearer', 'signed']

/** The route whose prefix matches the raw path (before "?"), and what its upstream must receive. */
function expected (target: string): { route: RouteName; forwarded: string } | undefined {
  const q = target.indexOf('?')
  const path = q === -1 ? target : target.slice(0, q)
  const route = ROUTES.find((r) => path.startsWith(r.prefix))
  if (route === undefined) return undefined
  const forwarded = 'rewrite' in route ? route.rewrite + target.slice(route.prefix.length) : target
  return { route: route.name, forwarded }
}

t.test('path confusion across three routes', async (t) => {
  const recorders: Record<RouteName, Recorder> = { A: await startRecorder(t), B: await startRecorder(t), C: await startRecorder(t) }
  const file = routeFile(t, `
routes:
  - prefix: /a/
    upstream: ${recorders.A.url}
    auth: public
  - prefix: /b/
    upstream: ${recorders.B.url}
    auth: signed
  - prefix: /c/
    upstream: ${recorders.C.url}
    auth: public
    rewrite: /internal/
`)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: 'http://unused.invalid', config: testConfig({ routesFile: file.path }) })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'paths')).status, 201)

  const counts = (): Record<RouteName, number> => ({ A: recorders.A.requests.length, B: recorders.B.requests.length, C: recorders.C.requests.length })
  const outcomes = new Tally()
  const table: string[] = []
  let wrongUpstream = 0
  let unsignedToB = 0
  let notByteForByte = 0
  let badStatus = 0
  const total = TARGETS.length * VARIANTS.length

  for (const target of TARGETS) {
    const cells: string[] = []
    for (const variant of VARIANTS) {
      const auth = variant === 'none'
        ? {}
        : variant === 'bearer'
          ? { authorization: `Bearer ${token}` }
          : signedHeaders({ keys, token, method: 'GET', target, timestamp: uniqueTimestamp() })
      const head = `GET ${target} HTTP/1.1\r\nHost: gateway.test\r\n` +
        Object.entries(auth).map(([k, v]) => `${k}: ${v}\r\n`).join('') +
        'Connection: close\r\n\r\n'
      const before = counts()
      const r = await exchange(gw.url, Buffer.from(head, 'latin1'))
      const after = counts()
      const status = r.responses[0]?.status ?? 0
      const code = /"code":"([A-Z_]+)"/.exec(r.responses[0]?.body.toString() ?? '')?.[1]
      const reached = (Object.keys(after) as RouteName[]).filter((name) => after[name] !== before[name])
      const want = expected(target)
      let cell = `${status}${code !== undefined ? ' ' + code : ''}`
      if (status >= 200 && status < 300) {
        const name = reached[0]
        const seen = name === undefined ? undefined : recorders[name].requests.at(-1)
        cell += ` -> ${reached.join('+') || 'nothing'} ${seen?.url ?? ''}`
        if (reached.length !== 1 || name === undefined || want === undefined || name !== want.route || after[name] - before[name] !== 1) {
          wrongUpstream++
          t.fail(`${JSON.stringify(target)} (${variant}): reached ${reached.join('+') || 'nothing'}, the raw path's route is ${want?.route ?? 'none'}`)
        } else if (seen?.url !== want.forwarded) {
          notByteForByte++
          t.fail(`${JSON.stringify(target)} (${variant}): ${name} received ${JSON.stringify(seen?.url)}, not ${JSON.stringify(want.forwarded)}`)
        }
        if (reached.includes('B') && variant !== 'signed') {
          unsignedToB++
          t.fail(`${JSON.stringify(target)} (${variant}) reached B without a signature`)
        }
      } else if (status >= 400 && status < 500) {
        if (reached.length > 0) {
          wrongUpstream++
          t.fail(`${JSON.stringify(target)} (${variant}): refused with ${status} but reached ${reached.join('+')}`)
        }
      } else {
        badStatus++
        t.fail(`${JSON.stringify(target)} (${variant}): ${status === 0 ? 'no answer' : status}, neither 2xx nor 4xx`)
      }
      outcomes.add(status >= 200 && status < 300 ? `2xx to ${reached.join('+')}` : String(status))
      cells.push(cell.padEnd(46))
    }
    table.push(`${JSON.stringify(target).padEnd(34)} ${cells.join(' ')}`)
  }

  t.comment(`\n${'target'.padEnd(34)} ${VARIANTS.map((v) => v.padEnd(46)).join(' ')}\n${table.join('\n')}`)
  t.comment(`outcomes: ${outcomes.toString()}`)
  t.equal(badStatus, 0, `${total} requests (${TARGETS.length} targets x ${VARIANTS.length}): 0 answered other than 2xx or 4xx`)
  t.equal(wrongUpstream, 0, `${total} requests: 0 reached another route's upstream than the raw path's`)
  t.equal(unsignedToB, 0, `${total} requests: 0 reached /b/'s upstream without a valid signature`)
  t.equal(notByteForByte, 0, `${total} requests: every forwarded target byte for byte (rewritten for /c/)`)
})
