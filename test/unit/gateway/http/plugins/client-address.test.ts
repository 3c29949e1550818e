// request.ip through real sockets: clients on different loopback addresses (127.0.0.1 plays the
// trusted proxy), and what each part that names the client makes of it: the login limits per
// address, the access log's `ip`, and the forwarding headers the upstream receives. The same
// behind a real nginx: test/system/trusted-proxies.test.ts.
import { Writable } from 'node:stream'
import t, { type Test } from 'tap'
import { loggerOptions } from '../../../../../gateway/src/app.js'
import type { ClientAddressConfig } from '../../../../../gateway/src/config/trusted-proxies.js'
import { route } from '../../../../../gateway/src/proxy/route.js'
import { send, type RawResponse } from '../../../../helpers/http.js'
import { startRecorder, type Recorder } from '../../../../helpers/recorder.js'
import { startTestGateway, type GatewayHandle } from '../../../../helpers/stack.js'

const PROXY = '127.0.0.1'
const CLIENT = '127.0.0.5'

interface Setup { gw: GatewayHandle; recorder: Recorder; logLine: (res: RawResponse) => Record<string, unknown> | undefined }

async function setup (t: Test, clientAddress: ClientAddressConfig, login = {}): Promise<Setup> {
  const recorder = await startRecorder(t)
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({
    write (chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line) as Record<string, unknown>)
      done()
    }
  })
  const gw = await startTestGateway(t, {
    store: 'memory',
    upstreamUrl: recorder.url,
    routes: (upstream) => [
      route({ prefix: '/echo/', upstream, auth: 'public' }, { bodyLimit: 1024, timeoutMs: 5000 }),
      route({ prefix: '/quiet/', upstream, auth: 'public', removeHeaders: ['x-forwarded-host'] }, { bodyLimit: 1024, timeoutMs: 5000 })
    ],
    config: { clientAddress, login },
    logger: { ...loggerOptions('info') as object, stream }
  })
  const logLine = (res: RawResponse) => lines.find((l) => l.msg === 'request' && l.reqId === res.headers['x-request-id'])
  return { gw, recorder, logLine }
}

const FORWARDING = {
  'x-forwarded-for': '198.51.100.7',
  'x-forwarded-proto': 'https',
  'x-forwarded-host': 'api.example.com',
  forwarded: 'for=6.6.6.6',
  'x-real-ip': '6.6.6.6'
}

t.test('X-Forwarded-For from a trusted proxy names the client; from anyone else it is ignored', async (t) => {
  const { gw, recorder, logLine } = await setup(t, { trustedProxies: [PROXY], header: 'x-forwarded-for' })

  const viaProxy = await send(gw.url, '/echo/a', { localAddress: PROXY, headers: FORWARDING })
  t.equal(viaProxy.status, 200)
  const proxied = recorder.requests.at(-1)?.headers
  t.equal(proxied?.['x-forwarded-for'], '198.51.100.7, 127.0.0.1', 'upstream: the chain as received, then the proxy')
  t.equal(proxied?.['x-forwarded-proto'], 'https', 'upstream: the proxy\'s X-Forwarded-Proto')
  t.equal(proxied?.['x-forwarded-host'], 'api.example.com', 'upstream: the proxy\'s X-Forwarded-Host')
  t.notOk(proxied !== undefined && 'forwarded' in proxied, 'no Forwarded: the proxy writes X-Forwarded-For, so Forwarded is the client\'s')
  t.notOk(proxied !== undefined && 'x-real-ip' in proxied, 'no X-Real-IP')
  t.equal(logLine(viaProxy)?.ip, '198.51.100.7', 'the access log names the client')

  const direct = await send(gw.url, '/echo/b', { localAddress: CLIENT, headers: FORWARDING })
  t.equal(direct.status, 200)
  const seen = recorder.requests.at(-1)?.headers ?? {}
  t.equal(seen['x-forwarded-for'], CLIENT, 'upstream: a direct client\'s own address, alone')
  t.same(['x-forwarded-proto', 'x-forwarded-host', 'forwarded', 'x-real-ip'].filter((name) => name in seen), [], 'none of its forwarding headers')
  t.equal(logLine(direct)?.ip, CLIENT, 'the access log names the socket\'s peer')

  const plain = await send(gw.url, '/echo/c', { localAddress: PROXY })
  t.equal(recorder.requests.at(-1)?.headers['x-forwarded-for'], PROXY, 'the proxy\'s own request (a health check): its address')
  t.equal(logLine(plain)?.ip, PROXY)

  const garbage = await send(gw.url, '/echo/d', { localAddress: PROXY, headers: { 'x-forwarded-for': '198.51.100.7, <script>' } })
  t.equal(logLine(garbage)?.ip, PROXY, 'an entry that is not an address: the last trusted hop, never the garbage or what is left of it')
  t.equal(recorder.requests.at(-1)?.headers['x-forwarded-for'], '198.51.100.7, <script>, 127.0.0.1', 'the chain passes on as received')

  await send(gw.url, '/quiet/', { localAddress: PROXY, headers: FORWARDING })
  const quiet = recorder.requests.at(-1)?.headers ?? {}
  t.notOk('x-forwarded-host' in quiet, 'a route\'s removeHeaders applies to the proxy\'s headers too')
  t.equal(quiet['x-forwarded-proto'], 'https')

  const refused = await send(gw.url, '/nowhere', { localAddress: PROXY, headers: FORWARDING })
  t.equal(refused.status, 404)
  t.equal(logLine(refused)?.ip, '198.51.100.7', 'refused requests are logged with the client too')
})

t.test('the login limits count per client, not per proxy', async (t) => {
  const { gw } = await setup(t, { trustedProxies: [PROXY], header: 'x-forwarded-for' }, { maxFailuresPerAddress: 1 })
  const attempt = async (localAddress: string, xff: string | undefined, username: string) => (await send(gw.url, '/v1/auth/token', {
    method: 'POST',
    localAddress,
    headers: { 'content-type': 'application/json', ...(xff !== undefined && { 'x-forwarded-for': xff }) },
    body: JSON.stringify({ username, password: 'wrong password' })
  })).status
  t.equal(await attempt(PROXY, '198.51.100.1', 'made-up-1'), 401, 'a first failure from a client behind the proxy')
  t.equal(await attempt(PROXY, '198.51.100.1', 'made-up-2'), 429, 'its second: over its budget')
  t.equal(await attempt(PROXY, '198.51.100.2', 'made-up-3'), 401, 'another client behind the same proxy is not locked out')
  t.equal(await attempt(CLIENT, '198.51.100.2', 'made-up-4'), 401, 'a direct client cannot spend another\'s budget by naming it')
  t.equal(await attempt(CLIENT, '198.51.100.9', 'made-up-5'), 429, 'nor escape its own by naming a fresh address')
})

t.test('Forwarded (RFC 7239) from a trusted proxy, when that is the header it writes', async (t) => {
  const { gw, recorder, logLine } = await setup(t, { trustedProxies: [PROXY], header: 'forwarded' })
  const res = await send(gw.url, '/echo/', {
    localAddress: PROXY,
    headers: { forwarded: 'for=6.6.6.6, for="[2001:db8::7]:4711";proto=https', 'x-forwarded-for': '6.6.6.6', 'x-forwarded-proto': 'http' }
  })
  t.equal(res.status, 200)
  t.equal(logLine(res)?.ip, '2001:db8::7', 'the right-most for= that is not trusted, unquoted, without brackets and port')
  const seen = recorder.requests.at(-1)?.headers ?? {}
  t.equal(seen.forwarded, 'for=6.6.6.6, for="[2001:db8::7]:4711";proto=https, for=127.0.0.1', 'upstream: Forwarded as received, the proxy\'s element added')
  t.equal(seen['x-forwarded-for'], '6.6.6.6, 2001:db8::7, 127.0.0.1', 'upstream: the same chain as X-Forwarded-For')
  t.notOk('x-forwarded-proto' in seen, 'X-Forwarded-Proto is not the proxy\'s in this mode')

  const direct = await send(gw.url, '/echo/', { localAddress: CLIENT, headers: { forwarded: 'for=198.51.100.7' } })
  t.equal(logLine(direct)?.ip, CLIENT, 'from an untrusted peer, Forwarded is ignored')
  t.notOk('forwarded' in (recorder.requests.at(-1)?.headers ?? {}), 'and not passed on')
})

t.test('without KEYGATE_TRUSTED_PROXIES every peer is the client', async (t) => {
  const { gw, recorder, logLine } = await setup(t, { trustedProxies: [], header: 'x-forwarded-for' })
  const res = await send(gw.url, '/echo/', { localAddress: PROXY, headers: FORWARDING })
  t.equal(logLine(res)?.ip, PROXY)
  t.equal(recorder.requests.at(-1)?.headers['x-forwarded-for'], PROXY)
  t.notOk('x-forwarded-proto' in (recorder.requests.at(-1)?.headers ?? {}))
})
