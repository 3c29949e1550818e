// guardedFetch's hostile cases, run by guarded-fetch.test.ts inside a network namespace that holds
// only loopback (unshare -n), so that a faulty guard fails the test instead of reaching a metadata
// service or a private network. It refuses to run anywhere else. Here, 1.2.3.4 (a public address)
// and 10.0.0.1 (a private one) are put on this namespace's loopback, with HTTPS servers on them and
// on 127.0.0.1 and ::1, all on one port, each counting its connections; nothing else is reachable.
// Prints one JSON line per case; the test judges them.
import { execFileSync } from 'node:child_process'
import { networkInterfaces } from 'node:os'
import { guardedFetch, GuardedFetchError, type GuardedFetchOptions, type Resolver } from '../../../../gateway/src/net/guarded-fetch.js'
import { certificates, startHttpsServer, type TestServer } from './servers.js'

const interfaces = Object.keys(networkInterfaces())
if (interfaces.length !== 1 || interfaces[0] !== 'lo') {
  console.error(`not in a network namespace with only loopback (interfaces: ${interfaces.join(', ')}): refusing to run`)
  process.exit(2)
}
console.log(JSON.stringify({ case: 'isolated', interfaces }))
execFileSync('ip', ['addr', 'add', '1.2.3.4/32', 'dev', 'lo'])
execFileSync('ip', ['addr', 'add', '10.0.0.1/32', 'dev', 'lo'])

const servers: Record<string, TestServer> = {}
const answer = (text: string) => (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse): void => {
  if (req.url === '/hop') res.writeHead(302, { location: '/directory', connection: 'close' }).end()
  else res.writeHead(200).end(text)
}
servers.public = await startHttpsServer('1.2.3.4', 0, answer('public'))
const port = servers.public.port
servers.private = await startHttpsServer('10.0.0.1', port, answer('private'))
servers.loopback = await startHttpsServer('127.0.0.1', port, answer('loopback'))
servers.loopback6 = await startHttpsServer('::1', port, answer('loopback6'))
const origin = `https://agent.test:${port}`
const base: GuardedFetchOptions = { ca: certificates().caPem, timeoutMs: 1000 }
const fixed = (...addresses: string[]): Resolver => async () => addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))
const count = (...names: string[]): number => names.reduce((sum, name) => sum + (servers[name]?.connections() ?? 0), 0)

async function attempt (url: string, options: GuardedFetchOptions): Promise<Record<string, unknown>> {
  try {
    const response = await guardedFetch(url, { ...base, ...options })
    return { ok: true, address: response.address, body: response.body.toString() }
  } catch (err) {
    if (!(err instanceof GuardedFetchError)) return { ok: false, unexpected: String(err) }
    return { ok: false, reason: err.reason, message: err.message, address: err.detail.address }
  }
}

async function report (name: string, run: () => Promise<Record<string, unknown>>): Promise<void> {
  const before = { private: count('private'), loopback: count('loopback', 'loopback6'), public: count('public') }
  const result = await run()
  console.log(JSON.stringify({
    case: name,
    ...result,
    connections: count('private', 'loopback', 'loopback6', 'public') - before.private - before.loopback - before.public,
    privateConnections: count('private', 'loopback', 'loopback6') - before.private - before.loopback,
    loopbackConnections: count('loopback', 'loopback6') - before.loopback,
    publicConnections: count('public') - before.public
  }))
}

await report('metadata', async () => await attempt(`${origin}/directory`, { resolver: fixed('169.254.169.254') }))
await report('metadata-pinned', async () => await attempt(`${origin}/directory`, { resolver: fixed('169.254.169.254'), allowedPrivateOrigins: [origin] }))
await report('metadata-v6', async () => await attempt(`${origin}/directory`, { resolver: fixed('fd00:ec2::254') }))
await report('literal-private', async () => await attempt(`https://10.0.0.1:${port}/directory`, {}))
await report('literal-metadata', async () => await attempt('https://169.254.169.254/latest/meta-data/', {}))
await report('literal-mapped', async () => await attempt('https://[::ffff:169.254.169.254]/latest/meta-data/', {}))
await report('literal-nat64', async () => await attempt(`https://[64:ff9b::a00:1]:${port}/directory`, {}))
await report('literal-v6-loopback', async () => await attempt(`https://[::1]:${port}/directory`, {}))
await report('mixed', async () => await attempt(`${origin}/directory`, { resolver: fixed('10.0.0.1', '127.0.0.1', '::1', '1.2.3.4') }))
// 1.2.3.5 is on no interface here: nothing answers, and no route leaves the namespace
await report('mixed-unreachable', async () => await attempt(`${origin}/directory`, { resolver: fixed('127.0.0.1', '10.0.0.1', '1.2.3.5') }))
await report('only-private', async () => await attempt(`${origin}/directory`, { resolver: fixed('10.0.0.1', '127.0.0.1', '::1') }))
await report('v6-forms', async () => await attempt(`${origin}/directory`, {
  resolver: fixed('::ffff:127.0.0.1', '::ffff:10.0.0.1', '64:ff9b::7f00:1', '2002:7f00:1::1', '::127.0.0.1', 'fe80::1')
}))

// DNS rebinding: the first answer is public, every later one loopback. The public server's
// redirect closes its connection, so following it makes a new connection and a new lookup.
await report('rebinding', async () => {
  let calls = 0
  const resolver: Resolver = async () => {
    calls++
    return [{ address: calls === 1 ? '1.2.3.4' : '127.0.0.1', family: 4 }]
  }
  const result = await attempt(`${origin}/hop`, { resolver, maxRedirects: 1 })
  return { ...result, resolverCalls: calls }
})
await report('rebinding-second-fetch', async () => {
  let calls = 0
  const resolver: Resolver = async () => {
    calls++
    return [{ address: calls === 1 ? '1.2.3.4' : '127.0.0.1', family: 4 }]
  }
  const first = await attempt(`${origin}/directory`, { resolver })
  const second = await attempt(`${origin}/directory`, { resolver })
  return { ...second, first: first.address }
})
await report('pinned-private', async () => await attempt(`${origin}/directory`, { resolver: fixed('10.0.0.1'), allowedPrivateOrigins: [origin] }))

for (const server of Object.values(servers)) await server.close()
