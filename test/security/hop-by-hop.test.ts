// Hop-by-hop and identity headers: a client may name the gateway's identity headers in
// Connection (so that a proxy strips them after the gateway set them), send them itself several
// times in any case, or send look-alikes with "_" that CGI-style servers read as the same name.
// Whatever it sends, a good signed request still succeeds and the upstream sees each identity
// header exactly once (counted in rawHeaders), with the gateway's value.
import t from 'tap'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, login, registerKey, startTestGateway } from '../helpers/stack.js'
import { exchange, rawHeaderNames, uniqueTimestamp } from '../helpers/security.js'

type Pairs = Array<[string, string]>

interface Case { name: string; headers: Pairs }

const FORGED_IDENTITY: Pairs = [
  ['X-Gateway-User', 'mallory'], ['X-Gateway-Key', 'f'.repeat(64)], ['X-Gateway-Key-Name', 'forged'], ['X-Gateway-Scopes', 'admin:all']
]

const CASES: Case[] = [
  { name: 'Connection: x-gateway-user, authorization', headers: [['Connection', 'x-gateway-user, authorization'], ...FORGED_IDENTITY] },
  {
    name: 'Connection: x-gateway-key, x-gateway-key-name, keep-alive',
    headers: [['Connection', 'x-gateway-key, x-gateway-key-name, keep-alive'], ...FORGED_IDENTITY]
  },
  { name: 'Connection: close, x-forwarded-for', headers: [['Connection', 'close, x-forwarded-for'], ['X-Forwarded-For', '6.6.6.6']] },
  { name: 'Connection: X-GATEWAY-USER, X-Gateway-Key (upper case)', headers: [['Connection', 'X-GATEWAY-USER, X-Gateway-Key'], ...FORGED_IDENTITY] },
  {
    name: 'two Connection headers naming identity headers',
    headers: [['Connection', 'keep-alive'], ['Connection', 'x-gateway-user'], ['connection', 'x-gateway-key-name'], ...FORGED_IDENTITY]
  },
  {
    name: 'Connection naming every header the gateway writes',
    headers: [['Connection', 'x-gateway-user, x-gateway-key, x-gateway-key-name, x-gateway-scopes, x-forwarded-for, content-length, host'], ...FORGED_IDENTITY]
  },
  { name: 'Connection with odd spacing and empty members', headers: [['Connection', ' ,x-gateway-user ,, \tx-gateway-key\t,'], ...FORGED_IDENTITY] },
  {
    name: 'Connection naming look-alikes',
    headers: [['Connection', 'x_gateway_user, x_gateway_key'], ['x_gateway_user', 'mallory'], ['x_gateway_key', 'forged']]
  },
  {
    name: 'each identity header three times, in three cases',
    headers: [
      ['X-Gateway-User', 'm1'], ['x-gateway-user', 'm2'], ['X-GATEWAY-USER', 'm3'],
      ['x-Gateway-Key', 'k1'], ['X-GATEWAY-KEY', 'k2'], ['x-gateway-key', 'k3'],
      ['X-Gateway-Key-Name', 'n1'], ['x-gateway-key-name', 'n2'], ['X-GATEWAY-KEY-NAME', 'n3']
    ]
  },
  { name: 'identity headers with empty values', headers: [['X-Gateway-User', ''], ['X-Gateway-Key', ''], ['X-Gateway-Key-Name', '']] },
  {
    name: 'underscore look-alikes in several cases',
    headers: [
      ['x_gateway_user', 'mallory'], ['X_Gateway_User', 'mallory'], ['X_GATEWAY_USER', 'mallory'], ['x-gateway_user', 'mallory'], ['x_gateway-user', 'mallory'],
      ['x_gateway_key', 'forged'], ['X_Gateway_Key_Name', 'forged'], ['x-gateway_key-name', 'forged'], ['x_gateway_admin', 'true'], ['X-Gateway-Admin', 'true']
    ]
  },
  { name: 'look-alikes and the real names together', headers: [['x_gateway_user', 'mallory'], ['X-Gateway-User', 'mallory'], ['x-gateway-user', 'mallory']] },
  {
    name: 'every hop-by-hop header at once',
    headers: [
      ['Connection', 'keep-alive, te, x-gateway-user'], ['Keep-Alive', 'timeout=5'], ['TE', 'trailers'], ['Proxy-Connection', 'keep-alive'],
      ['Upgrade', 'h2c'], ['Trailer', 'x-gateway-user'], ['X-Forwarded-For', '6.6.6.6'], ['X-Forwarded-Host', 'evil'], ['Forwarded', 'for=6.6.6.6'],
      ['X-Real-IP', '6.6.6.6'], ...FORGED_IDENTITY
    ]
  }
]

const IDENTITY = ['x-gateway-user', 'x-gateway-key', 'x-gateway-key-name', 'x-gateway-scopes'] as const

t.test(`${CASES.length} hostile header sets on signed requests: ${CASES.length} succeed, ` +
  'each identity header reaches the upstream exactly once with the gateway\'s value', async (t) => {
  const recorder = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: recorder.url })
  await addUser(gw, 'alice')
  await gw.app.keygate.users.setScopes('alice', ['clients:read', 'clients:write'])
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys, 'alice key')).status, 201)
  const expectedValues: Record<typeof IDENTITY[number], string> = {
    'x-gateway-user': 'alice', 'x-gateway-key': keys.apiKey, 'x-gateway-key-name': 'alice key', 'x-gateway-scopes': 'clients:read clients:write'
  }

  for (const { name, headers } of CASES) {
    t.test(name, async (t) => {
      const body = `{"case":${JSON.stringify(name)}}`
      const auth = signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body, timestamp: uniqueTimestamp() })
      const lines: Pairs = [
        ['Host', 'gateway.test'],
        ['Content-Type', 'application/json'],
        ...Object.entries(auth),
        ...headers,
        ['Content-Length', String(Buffer.byteLength(body))]
      ]
      const raw = `POST /v1/clients/ HTTP/1.1\r\n${lines.map(([k, v]) => `${k}: ${v}\r\n`).join('')}\r\n${body}`
      const before = recorder.requests.length
      const r = await exchange(gw.url, raw, { untilResponses: 1, timeoutMs: 5000 })
      t.equal(r.responses[0]?.status, 200, 'the request succeeds')
      t.equal(recorder.requests.length, before + 1, 'forwarded once')
      const seen = recorder.requests.at(-1)
      if (seen === undefined || recorder.requests.length === before) return
      t.equal(seen.body.toString(), body, 'the signed body')
      const names = rawHeaderNames(seen.rawHeaders)
      for (const header of IDENTITY) {
        t.equal(names.filter((n) => n === header).length, 1, `${header} exactly once`)
        t.equal(seen.headers[header], expectedValues[header], `${header}: the gateway's value`)
      }
      t.same(
        names.filter((n) => n.replaceAll('_', '-').startsWith('x-gateway-')).sort(),
        [...IDENTITY].sort(),
        'no other x-gateway-* header, look-alikes included'
      )
      t.equal(names.filter((n) => n === 'x-forwarded-for').length, 1, 'x-forwarded-for exactly once')
      t.equal(seen.headers['x-forwarded-for'], '127.0.0.1', 'x-forwarded-for: the gateway\'s view of the client')
      t.notOk(names.includes('authorization'), 'no Authorization upstream')
      t.notOk(names.includes('x-api-signature'), 'no X-API-Signature upstream')
      t.notOk(
        names.some((n) => ['forwarded', 'x-forwarded-host', 'x-real-ip', 'proxy-connection', 'keep-alive', 'upgrade', 'trailer'].includes(n)),
        'no client hop-by-hop or forwarding headers'
      )
    })
  }
})
