// What OpenTelemetry tracing adds to one signed, forwarded request: three gateways in this one
// process (tracing off, every request traced, 1% traced), the same signed GET sent to each in
// turn, alternating rounds, and the process's CPU time per request of each (median of rounds).
// The spans go over OTLP/HTTP to a sink in a child process (its CPU is not counted here); the
// upstream runs in this process, so its CPU is in every figure alike. Run it with
//   node --conditions=keygate-source --import tsx bench/tracing-overhead.ts
import { spawn } from 'node:child_process'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../gateway/src/app.js'
import { loadConfig } from '../gateway/src/config/env.js'
import { route } from '../gateway/src/proxy/route.js'
import { generateBenchKey, signingString, signOne } from './signing.js'

const REQUESTS = 2_000
const ROUNDS = 7
const PASSWORD = 'a password for the overhead bench'

// the sink: a child that reads every export and answers 200, an empty response in the export's encoding
const sink = spawn(process.execPath, ['-e', `
  const server = require('node:http').createServer((req, res) => {
    const protobuf = req.headers['content-type'] === 'application/x-protobuf'
    req.resume()
    req.on('end', () => res.writeHead(200, { 'content-type': protobuf ? 'application/x-protobuf' : 'application/json' }).end(protobuf ? '' : '{}'))
  })
  server.listen(0, '127.0.0.1', () => console.log(server.address().port))
`], { stdio: ['ignore', 'pipe', 'inherit'] })
const sinkPort = await new Promise<string>((resolve) => sink.stdout.once('data', (chunk: Buffer) => { resolve(chunk.toString().trim()) }))

const upstream = createServer((req, res) => {
  req.resume()
  req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'))
})
await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
const upstreamUrl = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
const key = await generateBenchKey('rsa')

async function gateway (env: Record<string, string>): Promise<FastifyInstance> {
  // the OTEL_* variables are read when the gateway starts its tracer
  for (const name of Object.keys(process.env)) if (name.startsWith('OTEL_')) delete process.env[name]
  Object.assign(process.env, env)
  const config = { ...loadConfig({ ...env, KEYGATE_PASSWORD_SCRYPT_LOG_N: '14' }), logLevel: 'warn' }
  const app = await buildApp({
    config,
    logger: false,
    routes: [route({ prefix: '/v1/clients/', upstream: upstreamUrl, auth: 'signed', name: 'clients' }, { bodyLimit: 1 << 20, timeoutMs: 5000 })]
  })
  await app.keygate.users.upsert('bench', PASSWORD)
  return app
}

const sinkUrl = `http://127.0.0.1:${sinkPort}`
const only = process.env.TRACING_OVERHEAD_ONLY?.split(',')
const all: Array<[string, FastifyInstance]> = [
  ['off', await gateway({})],
  ['all', await gateway({ OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl, OTEL_TRACES_SAMPLER: 'always_on' })],
  ['1%', await gateway({ OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl, OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.01' })]
]
const gateways = all.filter(([name]) => only === undefined || only.includes(name))

/** a signed GET, the same each time (a GET is not a replay), with each gateway's token */
const requests = new Map<FastifyInstance, Record<string, string>>()
for (const [, app] of gateways) {
  const login = await app.inject({ method: 'POST', url: '/v1/auth/token', payload: { username: 'bench', password: PASSWORD } })
  const token = (login.json<{ token: string }>()).token
  const registered = await app.inject({
    method: 'POST',
    url: '/v1/api-keys',
    headers: { authorization: `Bearer ${token}` },
    payload: { name: 'bench', publicKey: key.publicPem, signature: signOne(key, 'bench') }
  })
  if (registered.statusCode !== 201) throw new Error(`registering the key: ${registered.statusCode} ${registered.body}`)
  const timestamp = String(Date.now())
  requests.set(app, {
    authorization: `Bearer ${token}`,
    'x-api-key': key.apiKey,
    'x-api-timestamp': timestamp,
    'x-api-signature': signOne(key, signingString(timestamp, 'GET', '/v1/clients/1'))
  })
}

async function round (app: FastifyInstance): Promise<number> {
  const headers = requests.get(app) as Record<string, string>
  const started = process.cpuUsage()
  for (let i = 0; i < REQUESTS; i++) {
    const res = await app.inject({ method: 'GET', url: '/v1/clients/1', headers })
    if (res.statusCode !== 200) throw new Error(`${res.statusCode} ${res.body}`)
  }
  const used = process.cpuUsage(started)
  return (used.user + used.system) / REQUESTS
}

for (const [, app] of gateways) await round(app) // warm-up: V8 optimises, caches fill
const results = new Map<string, number[]>(gateways.map(([name]) => [name, []]))
for (let r = 0; r < ROUNDS; r++) {
  for (const [name, app] of gateways) results.get(name)?.push(await round(app))
}
const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN
const off = median(results.get('off') ?? [])
for (const [name, values] of results) {
  const sorted = [...values].sort((a, b) => a - b)
  const m = median(values)
  process.stdout.write(`tracing ${name.padEnd(3)}: ${m.toFixed(1)} us CPU per request (median of ${ROUNDS} rounds of ${REQUESTS}; ` +
    `min ${sorted[0]?.toFixed(1)}, max ${sorted.at(-1)?.toFixed(1)})${name === 'off' ? '' : `, ${(m - off).toFixed(1)} us more than off`}\n`)
}
for (const [, app] of gateways) await app.close()
upstream.close()
sink.kill()
