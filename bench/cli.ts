// `npm run bench`: keygate's load tool for signed APIs. With no --url it starts, each in its own
// process on a free loopback port, the example service (a), a bare fastify + @fastify/http-proxy
// in front of it (b), and keygate in front of it on Redis (c) and on the embedded store (d); logs
// in, registers a fresh RSA key, signs requests ahead, and measures the configurations in
// alternating rounds under the same load; with --scenario decision, nginx alone (g), nginx asking
// keygate's decision listener (h) and keygate inline (d) instead; asked for by name, keygate with a
// rate limit (f), with an IdP's token (i), or taking a signed agent's GETs (j). Everything it starts, and every
// Redis key it writes, is removed when it ends, also on Ctrl-C. `npm run bench -- --help` lists
// the options.
import { randomBytes, randomUUID } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { availableParallelism, cpus, loadavg, tmpdir } from 'node:os'
import { join, resolve } from 'node:path'
import { ENV_VARIABLES } from '../gateway/src/config/env.js'
import { parseBenchArgs, USAGE, UsageError, type BenchOptions, type ConfigId } from './args.js'
import { killAllServicesNow, startService, stopAllServices, type Service } from './children.js'
import { BENCH_IDP_AUDIENCE, BENCH_IDP_NAME, startBenchIssuer, verificationCost, type BenchIssuer } from './idp.js'
import { FLOOD_ADDRESS, killAllFloods, startFlood, type Flood, type FloodResult } from './flood.js'
import { measure, type MeasureOptions } from './measure.js'
import { findNginx, freePort, killAllNginxNow, loadDecisionConfig, plainConfig, startNginx, type RunningNginx } from './nginx.js'
import { deletePrefix, pingRedis, redisClient, redisCpuMicros } from './redis.js'
import {
  decisionFiguresOf, figuresOf, headlineLines, machineName, median, medianFlood, medianOf, renderHtml, renderTable, TABLE_COLUMNS, tableRows,
  type BenchReport, type ConfigResult, type Machine
} from './report.js'
import {
  buildRequests, CLIENTS_PATH, createSignedMaterial, ensureAgentGets, ensurePosts, ensureRegistrations, floodHeaders, postShare, refreshGets,
  REGISTRATION_POOL_SIZE, type Destination, type SignedMaterial
} from './scenarios.js'
import {
  agentKeyId, agentPublicJwk, BENCH_AGENT_ORIGIN, encodingOf, generateBenchKey, signOne, SigningPool, type BenchKey
} from './signing.js'
import { startTraceSink, traceEnv, type TraceSink } from './trace-sink.js'

const DEFAULT_OUT = join(tmpdir(), 'keygate-bench')
/** log in again before a measurement once the token is this old (tokens last 15 minutes by default) */
const TOKEN_REFRESH_MS = 5 * 60 * 1000
/**
 * First guess of a configuration's rate, to size the pool of signed POSTs before its first round
 * (later rounds use the rate measured): at most this, and at most this per connection. A guess
 * too low only means POSTs signed during the measurement, which the report warns about.
 */
const FIRST_RATE_GUESS = 3000
const FIRST_RATE_GUESS_PER_CONNECTION = 250

interface BenchConfig {
  id: ConfigId | 't'
  label: string
  url: string
  /** which process "CPU per request" is measured on */
  cpuOf: string | null
  destination: Destination
  cpu: MeasureOptions['cpu']
  /** keygate: log in again (a fresh token) */
  login?: () => Promise<void>
  tokenAt: number
  lastRps: number | undefined
}

const LABELS: Record<ConfigId, string> = {
  a: 'example service direct',
  b: 'fastify + http-proxy, no auth',
  c: 'keygate, Redis store',
  d: 'keygate, embedded store',
  e: 'keygate, public route (no auth)',
  f: 'keygate, Redis, one per-key limit',
  g: 'nginx, no auth',
  h: 'nginx asking keygate (decision), embedded store',
  i: 'keygate, Redis store, an IdP\'s token',
  j: 'keygate, Redis store, a signed agent'
}

// ---- cleanup: children, Redis keys, signing threads; on every way out ----

const cleanups: Array<() => Promise<void>> = []
let cleaning: Promise<void> | undefined
async function cleanup (): Promise<void> {
  cleaning ??= (async () => {
    for (const step of cleanups.reverse()) {
      try { await step() } catch (err) { process.stderr.write(`cleanup: ${(err as Error).message}\n`) }
    }
  })()
  await cleaning
}
let interrupted = false
function onSignal (signal: NodeJS.Signals): void {
  if (interrupted) { killAllServicesNow(); process.exit(1) }
  interrupted = true
  process.stderr.write(`\n${signal}: stopping and cleaning up (again to quit at once)\n`)
  cleanup().finally(() => process.exit(signal === 'SIGINT' ? 130 : 143))
}
process.on('SIGINT', onSignal)
process.on('SIGTERM', onSignal)
process.on('exit', killAllServicesNow)
process.on('exit', killAllFloods)
process.on('exit', killAllNginxNow)

// ---- keygate's API, for setting up a target ----

async function postJson (url: string, body: unknown, token?: string): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token !== undefined && { authorization: `Bearer ${token}` }) },
    body: JSON.stringify(body)
  })
  const text = await res.text()
  let json: Record<string, unknown> = {}
  try { json = JSON.parse(text) as Record<string, unknown> } catch { json = { text } }
  return { status: res.status, json }
}

async function login (url: string, username: string, password: string): Promise<string> {
  const { status, json } = await postJson(`${url}/v1/auth/token`, { username, password })
  if (status !== 200 || typeof json.token !== 'string') throw new Error(`login as ${username} at ${url} failed: ${status} ${JSON.stringify(json)}`)
  return json.token
}

async function registerKey (url: string, token: string, key: BenchKey, name: string): Promise<void> {
  const { status, json } = await postJson(`${url}/v1/api-keys`, { name, publicKey: key.publicPem, signature: signOne(key, name) }, token)
  if (status !== 201) throw new Error(`registering the bench key at ${url} failed: ${status} ${JSON.stringify(json)}`)
}

/** How a configuration gets its bearer token: keygate's login with a password, or an IdP's token (i). */
type SignIn = { username: string; password: string } | { idp: BenchIssuer; subject: string }

async function keygateConfig (
  id: BenchConfig['id'],
  label: string,
  url: string,
  signIn: SignIn,
  key: BenchKey,
  cpu: MeasureOptions['cpu'],
  cpuOf: string | null,
  /** where keygate's own API is (logins, keys), when the load goes elsewhere (h: to nginx) */
  apiUrl = url
): Promise<BenchConfig> {
  const token = async (): Promise<string> => 'idp' in signIn ? await signIn.idp.mint(signIn.subject) : await login(apiUrl, signIn.username, signIn.password)
  const config: BenchConfig = {
    id,
    label,
    url,
    cpuOf,
    cpu,
    destination: {
      kind: 'keygate', token: await token(), identityUser: undefined, credentials: 'idp' in signIn ? undefined : signIn, postCursor: 0
    },
    tokenAt: Date.now(),
    lastRps: undefined
  }
  config.login = async () => {
    config.destination.token = await token()
    config.tokenAt = Date.now()
  }
  await registerKey(apiUrl, config.destination.token, key, `bench-${randomBytes(6).toString('hex')}`)
  return config
}

// ---- Redis ----

async function checkRedis (url: string): Promise<void> {
  try {
    await pingRedis(url)
  } catch (err) {
    throw new Error(`configuration c needs Redis and ${url} does not answer (${(err as Error).message}): ` +
      'start one, set REDIS_URL, or leave c out with --only a,b,d')
  }
}

// ---- setting up the configurations ----

/** (f): the built-in routes, signed, each with one per-key rate limit too high ever to refuse. */
function limitedRouteFile (upstream: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-routes-'))
  cleanups.push(async () => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'routes.json')
  writeFileSync(file, JSON.stringify({
    routes: ['/v1/clients/', '/v1/transactions/'].map((prefix) => ({
      prefix, upstream, auth: 'signed', methods: ['GET', 'POST'], rateLimits: [{ by: 'key', limit: 1_000_000_000, window: '1m' }]
    }))
  }))
  return file
}

/**
 * (e): the business paths as a public route. The service still wants to know who calls: the
 * route adds the identity header the signed routes would (keygate drops any a client sends).
 */
function publicRouteFile (upstream: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-routes-'))
  cleanups.push(async () => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'routes.json')
  writeFileSync(file, JSON.stringify({
    routes: ['/v1/clients/', '/v1/transactions/'].map((prefix) => ({
      prefix, upstream, auth: 'public', methods: ['GET', 'POST'], addHeaders: { 'x-gateway-user': 'bench-public' }
    }))
  }))
  return file
}

/**
 * (j): the business paths as an agent route that lets in the bench's agent alone. The service
 * wants to know who calls: the route adds the identity header (an agent route has no user).
 */
function agentRouteFile (upstream: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-routes-'))
  cleanups.push(async () => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'routes.json')
  writeFileSync(file, JSON.stringify({
    routes: [{
      prefix: CLIENTS_PATH, upstream, auth: 'agent', agents: [BENCH_AGENT_ORIGIN], methods: ['GET'], addHeaders: { 'x-gateway-user': 'bench-agent' }
    }]
  }))
  return file
}

/**
 * (j): the agents file (KEYGATE_AGENT_DIRECTORIES) pinning the agent's directory with its one key:
 * keygate never fetches it, and holds it from the start, as it holds a directory it fetched.
 */
function agentsFile (key: BenchKey): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-agents-'))
  cleanups.push(async () => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'agents.json')
  writeFileSync(file, JSON.stringify({ directories: [{ origin: BENCH_AGENT_ORIGIN, keys: [agentPublicJwk(key)] }] }))
  return file
}

/** The environment of a keygate child: the parent's, minus any keygate setting, plus these. */
function gatewayEnv (settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of ENV_VARIABLES) delete env[name]
  // traces only with --trace: never because the shell that runs the bench exports OTEL_*
  for (const name of Object.keys(env)) if (name.startsWith('OTEL_')) delete env[name]
  return { ...env, ...settings }
}

interface OwnSetup {
  configs: BenchConfig[]
  /** every process started, for the report (and a test that checks they are gone) */
  services: Array<{ name: string; pid: number; url: string }>
  redisPrefix: string | undefined
  /** --trace: where the gateways' spans go */
  traceSink?: TraceSink | undefined
}

async function startOwnConfigs (options: BenchOptions, keyReady: Promise<BenchKey>, log: (line: string) => void): Promise<OwnSetup> {
  const want = new Set(options.only)
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  if (want.has('c') || want.has('f') || want.has('i') || want.has('j')) await checkRedis(redisUrl)
  // before anything starts: say how to get nginx, or that the page of its configuration moved
  const nginxBinary = want.has('g') || want.has('h') ? findNginx(options.nginx) : undefined
  const decisionConfig = want.has('h') ? loadDecisionConfig() : undefined
  cleanups.push(stopAllServices)

  log(`starting the example service${want.has('b') ? ', the bare proxy' : ''}${nginxBinary === undefined ? '' : ', nginx'} and keygate ...`)
  const profiles = options.cpuProf ? resolve(options.out, `profiles-${new Date().toISOString().replace(/[:.]/g, '-')}`) : undefined
  const profiled = profiles === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profiles}`]
  if (profiles !== undefined) log(`CPU profiles of the proxies go to ${profiles} (written when they stop)`)
  const upstream = await startService('example service', 'upstream', { ...process.env })
  let traced: Record<string, string> = {}
  let traceSink: TraceSink | undefined
  if (options.trace !== 'off') {
    const sink = traceSink = await startTraceSink()
    cleanups.push(sink.close)
    traced = traceEnv(options.trace, sink.url)
    log(`the gateways trace ${options.trace === 'all' ? 'every request' : `${options.trace * 100}% of requests`} to an OTLP sink at ${sink.url}`)
  }
  const password = randomBytes(18).toString('base64url')
  const gateway = async (id: 'c' | 'd' | 'e' | 'f' | 'h' | 'i' | 'j', username: string, extra: Record<string, string>): Promise<Service> =>
    await startService(`keygate (${id})`, 'keygate', gatewayEnv({
      PORT: '0',
      HOST: '127.0.0.1',
      UPSTREAM_URL: upstream.url,
      KEYGATE_BOOTSTRAP_USERS: `${username}:${password}`,
      LOG_LEVEL: options.logLevel,
      // token: one user logs in on every connection at once, and every attempt counts against
      // the per-user limit until its password is checked; the limit is not what is measured
      ...(options.scenario === 'token' && { KEYGATE_LOGIN_MAX_FAILURES_PER_USER: '1000000' }),
      // reject: what each refusal costs, all from one address; the budget of failed signature
      // checks per address would soon answer them all with 429 (the flood scenario measures it)
      ...(options.scenario === 'reject' && { KEYGATE_SIGNATURE_FAILURE_LIMIT: '1000000000' }),
      // register: 64 keys for one user; the limit of active keys per user is not what is measured
      // and neither is the limit of registrations per user (one user registers, and re-registers, all the time)
      ...(options.scenario === 'register' && {
        KEYGATE_MAX_KEYS_PER_USER: '10000', KEYGATE_KEY_REGISTRATIONS_PER_HOUR: '1000000', KEYGATE_KEY_REGISTRATIONS_PER_DAY: '10000000'
      }),
      ...options.gatewayEnv,
      ...traced,
      ...extra
    }), profiled)
  let prefix: string | undefined
  if (want.has('c')) {
    const p = prefix = `keygate-bench:${randomUUID()}:`
    cleanups.push(async () => {
      // once no gateway can write under it any more
      await stopAllServices()
      await deletePrefix(redisUrl, p)
    })
  }
  let limitedPrefix: string | undefined
  if (want.has('f')) {
    const p = limitedPrefix = `keygate-bench:${randomUUID()}:`
    cleanups.push(async () => {
      await stopAllServices()
      await deletePrefix(redisUrl, p)
    })
  }
  let idpPrefix: string | undefined
  let idp: BenchIssuer | undefined
  if (want.has('i')) {
    const p = idpPrefix = `keygate-bench:${randomUUID()}:`
    cleanups.push(async () => {
      await stopAllServices()
      await deletePrefix(redisUrl, p)
    })
    const issuer = idp = await startBenchIssuer()
    cleanups.push(issuer.close)
  }
  let agentPrefix: string | undefined
  if (want.has('j')) {
    const p = agentPrefix = `keygate-bench:${randomUUID()}:`
    cleanups.push(async () => {
      await stopAllServices()
      await deletePrefix(redisUrl, p)
    })
  }
  const [bare, redisGateway, memoryGateway, publicGateway, limitedGateway, decisionGateway, idpGateway, agentGateway] = await Promise.all([
    want.has('b') ? startService('bare proxy', 'bare', { ...process.env, BENCH_UPSTREAM_URL: upstream.url }, profiled) : undefined,
    // BENCH_OWNS_PREFIX: should this process die, the gateway deletes the prefix itself
    want.has('c')
      ? gateway('c', 'bench-redis', {
        REDIS_URL: redisUrl, KEYGATE_REDIS_PREFIX: prefix as string, BENCH_OWNS_PREFIX: '1', KEYGATE_WORKERS: String(options.workers)
      })
      : undefined,
    // the embedded store lives in one process: always one
    want.has('d') ? gateway('d', 'bench-memory', { KEYGATE_WORKERS: '1' }) : undefined,
    want.has('e') ? gateway('e', 'bench-public', { KEYGATE_ROUTES: publicRouteFile(upstream.url), KEYGATE_WORKERS: '1' }) : undefined,
    want.has('f')
      ? gateway('f', 'bench-limited', {
        REDIS_URL: redisUrl,
        KEYGATE_REDIS_PREFIX: limitedPrefix as string,
        BENCH_OWNS_PREFIX: '1',
        KEYGATE_WORKERS: String(options.workers),
        KEYGATE_ROUTES: limitedRouteFile(upstream.url)
      })
      : undefined,
    // (h): keygate's decision listener, which nginx on this machine asks; its public port is for logging in
    want.has('h')
      ? gateway('h', 'bench-decision', { KEYGATE_WORKERS: '1', KEYGATE_DECISION_PORT: '0', KEYGATE_DECISION_TRUSTED_PROXIES: '127.0.0.1' })
      : undefined,
    // (i): (c) trusting the bench's issuer; its one user is the IdP's, made on its first request
    idp !== undefined
      ? gateway('i', 'bench-idp-unused', {
        REDIS_URL: redisUrl,
        KEYGATE_REDIS_PREFIX: idpPrefix as string,
        BENCH_OWNS_PREFIX: '1',
        KEYGATE_WORKERS: String(options.workers),
        KEYGATE_OIDC_ISSUER: idp.url,
        KEYGATE_OIDC_AUDIENCE: BENCH_IDP_AUDIENCE,
        KEYGATE_OIDC_NAME: BENCH_IDP_NAME
      })
      : undefined,
    // (j): (c) with /v1/clients/ an agent route, the agent's directory pinned with the bench's key (made first: it is in the agents file)
    want.has('j')
      ? keyReady.then(async (key) => await gateway('j', 'bench-agent-unused', {
        REDIS_URL: redisUrl,
        KEYGATE_REDIS_PREFIX: agentPrefix as string,
        BENCH_OWNS_PREFIX: '1',
        KEYGATE_WORKERS: String(options.workers),
        KEYGATE_ROUTES: agentRouteFile(upstream.url),
        KEYGATE_AGENT_DIRECTORIES: agentsFile(key)
      }))
      : undefined
  ])
  // g and h: one nginx, a server (port) for each
  let nginx: { running: RunningNginx; g: string | undefined; h: string | undefined } | undefined
  if (nginxBinary !== undefined) {
    // at once, so that the two are different ports
    const [gPort, hPort] = await Promise.all([freePort(), freePort()])
    const decisionUrl = decisionGateway?.decisionUrl
    if (decisionGateway !== undefined && decisionUrl === undefined) throw new Error('keygate (h) did not report its decision listener')
    const servers = [
      want.has('g') ? plainConfig(gPort, upstream.url) : '',
      decisionConfig !== undefined && decisionUrl !== undefined ? decisionConfig(hPort, decisionUrl, upstream.url) : ''
    ].join('\n')
    const ports = [...(want.has('g') ? [gPort] : []), ...(want.has('h') ? [hPort] : [])]
    const running = await startNginx(nginxBinary, servers, ports, options.connections)
    cleanups.push(running.stop)
    nginx = { running, g: want.has('g') ? `http://127.0.0.1:${gPort}` : undefined, h: want.has('h') ? `http://127.0.0.1:${hPort}` : undefined }
  }

  const key = await keyReady
  const configs: BenchConfig[] = []
  const upstreamCpu = upstream.cpuMicros
  const direct = (id: 'a' | 'b' | 'e' | 'g', url: string, identityUser: string, cpu: MeasureOptions['cpu'], cpuOf: string): BenchConfig => ({
    id,
    label: LABELS[id],
    url,
    cpuOf,
    cpu,
    tokenAt: Date.now(),
    lastRps: undefined,
    destination: { kind: id === 'a' ? 'direct' : 'bare', token: '', identityUser, credentials: undefined, postCursor: 0 }
  })
  if (want.has('a')) configs.push(direct('a', upstream.url, 'bench-direct', { proxy: upstreamCpu }, 'example service'))
  if (bare !== undefined) configs.push(direct('b', bare.url, 'bench-bare', { proxy: bare.cpuMicros, upstream: upstreamCpu }, 'bare proxy'))
  if (publicGateway !== undefined) {
    configs.push(direct('e', publicGateway.url, 'bench-public', { proxy: publicGateway.cpuMicros, upstream: upstreamCpu }, 'keygate'))
  }
  if (nginx?.g !== undefined) configs.push(direct('g', nginx.g, 'bench-nginx', { proxy: nginx.running.cpuMicros, upstream: upstreamCpu }, 'nginx'))
  const redisCpu = async (): Promise<() => Promise<number>> => {
    const redis = redisClient(redisUrl)
    cleanups.push(async () => { redis.disconnect() })
    await redis.connect()
    return async () => await redisCpuMicros(redis)
  }
  // logging in costs a password check each (scrypt): both at once
  const gateways = await Promise.all([
    redisGateway === undefined
      ? undefined
      : keygateConfig(
        'c',
        options.workers > 1 ? `${LABELS.c}, ${options.workers} workers` : LABELS.c,
        redisGateway.url,
        { username: 'bench-redis', password },
        key,
        { proxy: redisGateway.cpuMicros, upstream: upstreamCpu, redis: await redisCpu() },
        options.workers > 1 ? `keygate (primary and ${options.workers} workers)` : 'keygate'
      ),
    memoryGateway === undefined
      ? undefined
      : keygateConfig('d', LABELS.d, memoryGateway.url, { username: 'bench-memory', password }, key,
        { proxy: memoryGateway.cpuMicros, upstream: upstreamCpu }, 'keygate'),
    limitedGateway === undefined
      ? undefined
      : keygateConfig(
        'f',
        options.workers > 1 ? `${LABELS.f}, ${options.workers} workers` : LABELS.f,
        limitedGateway.url,
        { username: 'bench-limited', password },
        key,
        { proxy: limitedGateway.cpuMicros, upstream: upstreamCpu, redis: await redisCpu() },
        options.workers > 1 ? `keygate (primary and ${options.workers} workers)` : 'keygate'
      ),
    // the load goes to nginx; what is compared is keygate's CPU (nginx's is measured beside it)
    decisionGateway === undefined || nginx?.h === undefined
      ? undefined
      : keygateConfig('h', LABELS.h, nginx.h, { username: 'bench-decision', password }, key,
        { proxy: decisionGateway.cpuMicros, upstream: upstreamCpu, nginx: nginx.running.cpuMicros }, 'keygate (its decision listener)', decisionGateway.url),
    idpGateway === undefined || idp === undefined
      ? undefined
      : keygateConfig(
        'i',
        options.workers > 1 ? `${LABELS.i}, ${options.workers} workers` : LABELS.i,
        idpGateway.url,
        { idp, subject: 'bench-agent' },
        key,
        { proxy: idpGateway.cpuMicros, upstream: upstreamCpu, redis: await redisCpu() },
        options.workers > 1 ? `keygate (primary and ${options.workers} workers)` : 'keygate'
      )
  ])
  for (const config of gateways) if (config !== undefined) configs.push(config)
  // (j): no login and no key to register: the agent is known by its signature, its key pinned in the agents file
  if (agentGateway !== undefined) {
    configs.push({
      id: 'j',
      label: options.workers > 1 ? `${LABELS.j}, ${options.workers} workers` : LABELS.j,
      url: agentGateway.url,
      cpuOf: options.workers > 1 ? `keygate (primary and ${options.workers} workers)` : 'keygate',
      cpu: { proxy: agentGateway.cpuMicros, upstream: upstreamCpu, redis: await redisCpu() },
      tokenAt: Date.now(),
      lastRps: undefined,
      destination: {
        kind: 'agent',
        token: '',
        identityUser: undefined,
        credentials: undefined,
        postCursor: 0,
        // signed for the Host autocannon sends: the gateway's host:port
        agent: { authority: new URL(agentGateway.url).host, keyid: agentKeyId(key), signed: [], cursor: 0 }
      }
    })
  }
  configs.sort((x, y) => x.id.localeCompare(y.id))
  // (a) and (b) send a token of the real size: the service ignores it
  const token = configs.find((c) => c.destination.kind === 'keygate')?.destination.token ?? 'x'.repeat(300)
  for (const c of configs) if (c.destination.kind !== 'keygate') c.destination.token = token
  const services = [upstream, bare, redisGateway, memoryGateway, publicGateway, limitedGateway, decisionGateway, idpGateway, agentGateway]
    .filter((s) => s !== undefined).map(({ name, pid, url }) => ({ name, pid, url }))
  if (nginx !== undefined) services.push({ name: 'nginx', pid: nginx.running.pid, url: [nginx.g, nginx.h].filter((u) => u !== undefined).join(' ') })
  return { configs, services, redisPrefix: prefix ?? limitedPrefix ?? idpPrefix ?? agentPrefix, traceSink }
}

// ---- the run ----

function progress (options: BenchOptions): { line: (text: string) => void; done: (text: string) => void; log: (text: string) => void } {
  const tty = process.stderr.isTTY
  return {
    line: (text) => { if (tty) process.stderr.write(`\r\x1b[K${text}`) },
    done: (text) => { process.stderr.write(tty ? `\r\x1b[K${text}\n` : `${text}\n`) },
    log: (text) => { if (!options.json || tty) process.stderr.write(`${text}\n`) }
  }
}

function describe (options: BenchOptions, rate: number | undefined = typeof options.rate === 'number' ? options.rate : undefined): string {
  const load = rate !== undefined
    ? `${rate.toLocaleString('en-US')} req/s fixed${options.rate === 'half' ? ' (half of b\'s peak)' : ''} on ${options.connections} connections`
    : options.rate === 'half' ? `half of b's peak on ${options.connections} connections` : `${options.connections} connections`
  const refused = options.scenario === 'reject'
    ? ` (${Math.round(options.rejectShare * 100)}% refused${options.rejectKind === 'all' ? '' : `: ${options.rejectKind}`})`
    : ''
  return `scenario ${options.scenario}${refused}, ${options.scheme} scheme, ${options.keyType} key, ` +
    `${load}, ${options.duration} s measured after ${options.warmup} s warm-up, ` +
    `${options.rounds} alternating round${options.rounds === 1 ? '' : 's'} (medians)` +
    `${options.workers > 1 && options.target === undefined ? `; keygate on Redis with ${options.workers} worker processes` : ''}` +
    `${options.trace === 'off' ? '' : `; traces of ${options.trace === 'all' ? 'every request' : `${options.trace * 100}% of requests`} exported over OTLP`}`
}

/** the machine: what it is, now */
const MACHINE = {
  cpus: availableParallelism(), cpuModel: cpus()[0]?.model.trim() ?? '', node: process.version, platform: `${process.platform}-${process.arch}`
}

async function run (options: BenchOptions): Promise<void> {
  const started = new Date()
  const loadAtStart = loadavg()
  const say = progress(options)
  say.log(`keygate bench: ${describe(options)}`)
  say.log(`machine: ${machineName(MACHINE)}`)
  const keyReady = generateBenchKey(options.keyType)
  keyReady.catch(() => {})
  const setup: OwnSetup = options.target === undefined
    ? await startOwnConfigs(options, keyReady, say.log)
    : {
        configs: [await keygateConfig(
          't', `keygate at ${options.target.url}`, options.target.url, { username: options.target.user, password: options.target.password },
          await keyReady, {}, null
        )],
        services: [],
        redisPrefix: undefined
      }
  const { configs } = setup
  const key = await keyReady
  const signer = new SigningPool(key, encodingOf(options.scheme))
  cleanups.push(async () => { await signer.close() })
  cleanups.push(async () => { killAllFloods() })
  if (configs.length === 0) throw new UsageError('nothing to run')

  say.log('signing requests ...')
  const material: SignedMaterial = await createSignedMaterial(key, options.scheme, signer)
  if (options.scenario === 'register') {
    say.log(`making ${REGISTRATION_POOL_SIZE} RSA keys to register ...`)
    await ensureRegistrations(material, REGISTRATION_POOL_SIZE)
  }
  // (i): what verifying an IdP token costs the first time, keygate's verifier in this process, before the load starts
  let idpVerificationUs: number | undefined
  if (configs.some((c) => c.id === 'i')) {
    say.log('measuring what verifying an IdP token costs, uncached ...')
    idpVerificationUs = await verificationCost()
  }
  const results = new Map<string, ConfigResult['rounds']>(configs.map((c) => [c.id, []]))
  const share = postShare(options.scenario)

  // --rate half: (b) as fast as it goes first, then everyone at half of that
  let rate = options.rate === 'half' ? undefined : options.rate
  let barePeakRps: number | undefined
  if (options.rate === 'half') {
    const bare = configs.find((c) => c.id === 'b') as BenchConfig
    say.line(`b ${bare.label}: measuring its peak for --rate half`)
    await refreshGets(material, signer)
    const peak = await measure({
      url: bare.url,
      connections: options.connections,
      duration: options.duration,
      warmup: options.warmup,
      requests: () => buildRequests(options.scenario, bare.destination, material, options.rejectShare, options.rejectKind),
      cpu: {}
    })
    barePeakRps = peak.rps
    rate = Math.max(1, Math.round(peak.rps / 2))
    say.done(`b ${bare.label}: peak ${Math.round(peak.rps).toLocaleString('en-US')} req/s; ` +
      `every configuration now runs at ${rate.toLocaleString('en-US')} req/s`)
  }

  const flooding = options.scenario === 'flood'
  if (flooding) for (const c of configs) results.set(floodId(c.id), [])
  for (let round = 1; round <= options.rounds; round++) {
    // a different configuration goes first each round, so none always follows the same one
    const order = configs.map((_, i) => configs[(i + round - 1) % configs.length] as BenchConfig)
    for (const [position, config] of order.entries()) {
      // flood: each configuration alone and under the flood, in turn first
      const variants = !flooding ? [false] : round % 2 === 1 ? [false, true] : [true, false]
      for (const underFlood of variants) {
        if (config.login !== undefined && Date.now() - config.tokenAt > TOKEN_REFRESH_MS) await config.login()
        await refreshGets(material, signer)
        // requests each good for one: as many as the measurement may send, with a margin
        const oneUse = config.destination.kind === 'agent' ? 1 : config.destination.kind === 'keygate' ? share : 0
        const expected = (rate ?? config.lastRps ?? Math.min(FIRST_RATE_GUESS, FIRST_RATE_GUESS_PER_CONNECTION * options.connections)) * oneUse
        const needed = Math.ceil(expected * (options.warmup + options.duration) * 1.3) + 2 * options.connections
        if (config.destination.kind === 'agent') {
          say.line(`round ${round}/${options.rounds}  ${config.id} ${config.label}: signing ${needed} agent GETs ...`)
          await ensureAgentGets(material, signer, config.destination, needed)
        } else if (oneUse > 0) {
          say.line(`round ${round}/${options.rounds}  ${config.id} ${config.label}: signing ${needed} POSTs ...`)
          await ensurePosts(material, signer, config.destination, needed)
        }
        const inlineBefore = material.inlineSigned
        const title = `round ${round}/${options.rounds}  ${config.id} ${config.label}${!flooding ? '' : underFlood ? ', under the flood' : ', alone'}`
        say.line(`${title}: warming up`)
        const flood: Flood | undefined = underFlood
          ? await startFlood({ url: config.url, connections: options.connections, path: CLIENTS_PATH, headers: floodHeaders(config.destination, material) })
          : undefined
        let seen: FloodResult | undefined
        let m
        try {
          m = await measure({
            url: config.url,
            connections: options.connections,
            rate,
            duration: options.duration,
            warmup: options.warmup,
            requests: () => buildRequests(options.scenario, config.destination, material, options.rejectShare, options.rejectKind),
            cpu: config.cpu,
            onSecond: (second, count) => { say.line(`${title}: ${second + 1}/${options.duration} s  ${count.toLocaleString('en-US')} req/s`) },
            ...(flood !== undefined && { onMeasuring: flood.mark })
          })
        } finally {
          seen = await flood?.stop()
        }
        // the flooding process is part of the run, not other work on the machine
        if (seen !== undefined && m.otherCpuPercent !== null) {
          m = { ...m, otherCpuPercent: Math.max(0, Math.round((m.otherCpuPercent - seen.cpuPercent) * 10) / 10) }
        }
        if (!underFlood) config.lastRps = m.rps
        results.get(underFlood ? floodId(config.id) : config.id)?.push({
          ...m, round, position, inlineSignedPosts: material.inlineSigned - inlineBefore, ...(seen !== undefined && { flood: seen })
        })
        say.done(`${title}: ${Math.round(m.rps).toLocaleString('en-US')} req/s, p99 ${m.latency.p99} ms` +
          `${m.cpuPerRequestUs === null ? '' : `, ${m.cpuPerRequestUs} us CPU/req`}` +
          `${seen === undefined ? '' : `; the flood: ${Math.round(seen.rps).toLocaleString('en-US')} answers/s`}`)
      }
    }
  }

  const loadAtEnd = loadavg()
  const bare = configs.find((c) => c.id === 'b')
  const bareRps = bare === undefined ? undefined : medianOf(results.get('b') ?? []).rps
  const resultOf = (c: BenchConfig, id: string, label: string): ConfigResult => {
    const rounds = results.get(id) ?? []
    const m = medianOf(rounds)
    const floods = rounds.flatMap((r) => r.flood === undefined ? [] : [r.flood])
    return {
      id,
      label,
      url: c.url,
      cpuOf: c.cpuOf,
      rounds,
      median: { ...m, ratioToBare: bareRps === undefined || bareRps === 0 ? null : Math.round((m.rps / bareRps) * 100) / 100 },
      ...(floods.length > 0 && { flood: medianFlood(floods) })
    }
  }
  const configResults: ConfigResult[] = configs.flatMap((c) => flooding
    ? [resultOf(c, c.id, `${c.label}: good traffic alone`), resultOf(c, floodId(c.id), `${c.label}: good traffic, flood from ${FLOOD_ADDRESS}`)]
    : [resultOf(c, c.id, c.label)])

  const warnings: string[] = []
  // reject: refusals are the point; register: every key but the first pass is a duplicate
  const accepted = options.scenario !== 'reject' && options.scenario !== 'register'
  for (const c of configResults) {
    const name = `${c.id} (${c.label})`
    if (c.rounds.some((r) => r.requests === 0)) warnings.push(`${name}: no response completed within a measurement; use a longer --duration`)
    const errors = c.rounds.reduce((sum, r) => sum + r.socketErrors + r.timeouts, 0)
    if (errors > 0) warnings.push(`${name}: ${errors} connection errors or timeouts`)
    if (options.scenario === 'token' && (c.median.statuses['429'] ?? 0) > 0) {
      warnings.push(`${name}: 429 RATE_LIMITED: more logins at once than the gateway lets wait (KEYGATE_LOGIN_CONCURRENCY + KEYGATE_LOGIN_QUEUE), ` +
        'or, with --url, than its per-user limit (KEYGATE_LOGIN_MAX_FAILURES_PER_USER); try fewer --connections')
    }
    if (options.scenario === 'register') {
      const other = Object.entries(c.median.statuses).filter(([status]) => status !== '201' && status !== '409')
      if (other.length > 0) warnings.push(`${name}: registrations answered other than 201 or 409 DUPLICATE_KEY: ${JSON.stringify(Object.fromEntries(other))}`)
    }
    if (accepted && c.median.non2xx > 0) {
      warnings.push(`${name}: ${c.median.non2xx} non-2xx responses (median per round) where all should succeed: ${JSON.stringify(c.median.statuses)}`)
    }
    const inline = c.rounds.reduce((sum, r) => sum + r.inlineSignedPosts, 0)
    if (inline > 0) {
      warnings.push(`${name}: the pool of ${c.id === 'j' ? 'agent-signed GETs' : 'signed POSTs'} ran out; ${inline} were signed during the measurement, ` +
        'which slows the load generator')
    }
    // (with --url the target's own CPU is in "other")
    if (c.cpuOf !== null && c.median.otherCpuPercent !== null && c.median.otherCpuPercent > 20) {
      warnings.push(`${name}: other work used ${c.median.otherCpuPercent}% of a core during the measurements: the figures are noisy`)
    }
    if (c.median.generatorCpuPercent > 90) {
      warnings.push(`${name}: the load generator used ${c.median.generatorCpuPercent}% of a core: it may be what limits the rate`)
    }
  }

  mkdirSync(options.out, { recursive: true })
  const stamp = started.toISOString().replace(/[:.]/g, '-')
  const files = { json: resolve(options.out, `${stamp}.json`), html: resolve(options.out, `${stamp}.html`) }
  const finished = new Date()
  const others = configResults.flatMap((c) => c.rounds.flatMap((r) => r.otherCpuPercent === null ? [] : [r.otherCpuPercent]))
  const machine: Machine = {
    ...MACHINE,
    loadAverage: { start: loadAtStart, end: loadAtEnd },
    otherCpuPercent: others.length === 0 ? null : { median: median(others), max: Math.max(...others) }
  }
  const report: BenchReport = {
    tool: 'keygate-bench',
    version: 1,
    figures: figuresOf(configResults, options, idpVerificationUs),
    machine,
    ...(options.scenario === 'decision' && { decision: decisionFiguresOf(configResults, options) }),
    startedAt: started.toISOString(),
    finishedAt: finished.toISOString(),
    wallSeconds: Math.round((finished.getTime() - started.getTime()) / 100) / 10,
    options: {
      scenario: options.scenario,
      scheme: options.scheme,
      keyType: options.keyType,
      duration: options.duration,
      warmup: options.warmup,
      connections: options.connections,
      rate,
      barePeakRps,
      rounds: options.rounds,
      rejectShare: options.scenario === 'reject' ? options.rejectShare : undefined,
      rejectKind: options.scenario === 'reject' ? options.rejectKind : undefined,
      floodFrom: flooding ? FLOOD_ADDRESS : undefined,
      gatewayEnv: Object.keys(options.gatewayEnv).length > 0 ? options.gatewayEnv : undefined,
      trace: options.trace === 'off' ? undefined : options.trace,
      // the OTLP exports the sink received while measuring (the last batches come as the gateways stop)
      traceExports: setup.traceSink?.exports(),
      configs: configs.map((c) => c.id),
      target: options.target?.url,
      gatewayLogLevel: options.target === undefined ? options.logLevel : undefined,
      redisPrefix: setup.redisPrefix
    },
    services: setup.services,
    configs: configResults,
    warnings,
    files
  }
  writeFileSync(files.json, `${JSON.stringify(report, null, 2)}\n`)
  writeFileSync(files.html, renderHtml(report, `keygate bench: ${describe(options, rate)}`))

  if (options.json) {
    process.stdout.write(`${JSON.stringify(report, null, 2)}\n`)
  } else {
    const headline = headlineLines(report)
    process.stdout.write([
      '',
      `keygate bench: ${describe(options, rate)}`,
      ...headline.figures,
      ...headline.how,
      '',
      renderTable(TABLE_COLUMNS, tableRows(configResults)),
      '',
      ...refusalsByCode(configResults),
      ...goodUnderFlood(configResults),
      ...latencyAgainstBare(configResults, rate),
      'CPU us/req: CPU time (user + system) of the process the load goes to (the proxy; for a, the service itself; for g, nginx;',
      'for h, keygate, which nginx asks: nginx\'s own is in the lines on top) per request;',
      'upstream us/req: the example service\'s; Redis us/req: the Redis server\'s (INFO cpu). x (b): req/s over the bare proxy\'s.',
      'loadgen CPU: this process, % of one core. other CPU: the rest of the machine meanwhile, % of one core: when high, the figures are noisy.',
      ...warnings.map((w) => `warning: ${w}`),
      '',
      `JSON: ${files.json}`,
      `HTML: ${files.html}`,
      `took ${report.wallSeconds} s`,
      ''
    ].join('\n'))
  }
}

/** the results key of a configuration's measurements under the flood */
function floodId (id: string): string {
  return `${id} flood`
}

/** --scenario flood: good traffic under the flood against alone, and what the flood got. */
function goodUnderFlood (results: ConfigResult[]): string[] {
  const lines = results.flatMap((under) => {
    if (under.flood === undefined) return []
    const alone = results.find((c) => floodId(c.id) === under.id)
    if (alone === undefined) return []
    const ratio = alone.median.rps === 0 ? 0 : under.median.rps / alone.median.rps
    const perRound = under.rounds.map((r) => {
      const same = alone.rounds.find((a) => a.round === r.round)
      return same === undefined || same.rps === 0 ? '-' : `${Math.round((r.rps / same.rps) * 100)}%`
    })
    const f = under.flood
    const answers = Object.entries(f.codes).map(([code, n]) => `${code} ${Math.round(n).toLocaleString('en-US')}`).join(', ')
    return [
      `${alone.id}: good traffic under the flood: ${Math.round(under.median.rps).toLocaleString('en-US')} req/s against ` +
        `${Math.round(alone.median.rps).toLocaleString('en-US')} alone: ${Math.round(ratio * 100)}% (per round: ${perRound.join(', ')})`,
      `${alone.id}: the flood from ${FLOOD_ADDRESS}: ${Math.round(f.rps).toLocaleString('en-US')} answers/s; in ${Math.round(f.seconds)} s: ` +
        `${answers === '' ? 'none refused' : answers}${f.errors > 0 ? `, ${f.errors} connection errors` : ''}; flooding process CPU ${f.cpuPercent}%`
    ]
  })
  return lines.length === 0
    ? []
    : ['good traffic under a flood of bad signatures (medians; under the flood, CPU us/req is the gateway\'s CPU per good request, the flood\'s included):',
        ...lines, '']
}

/** The non-2xx answers of each configuration by status and problem+json code (medians per round). */
function refusalsByCode (results: ConfigResult[]): string[] {
  const lines = results.filter((c) => Object.keys(c.median.codes).length > 0).map((c) =>
    `${c.id}: ${Object.entries(c.median.codes).map(([key, n]) => `${key} ${Math.round(n).toLocaleString('en-US')}`).join(', ')}`)
  return lines.length === 0 ? [] : ['refusals by code (median per round):', ...lines, '']
}

/** At a fixed rate every configuration serves the same load: what matters is how much later each answers than (b). */
function latencyAgainstBare (results: ConfigResult[], rate: number | undefined): string[] {
  const bare = results.find((c) => c.id === 'b')
  if (rate === undefined || bare === undefined) return []
  const others = results.filter((c) => c.id !== 'b')
  if (others.length === 0) return []
  const diff = (ms: number): string => `${ms >= 0 ? '+' : ''}${ms.toFixed(2)} ms`
  return [
    `at ${rate.toLocaleString('en-US')} req/s, latency over (b): ` +
      others.map((c) => `${c.id} p50 ${diff((c.median.latency.p50 ?? 0) - (bare.median.latency.p50 ?? 0))}, ` +
        `p99 ${diff((c.median.latency.p99 ?? 0) - (bare.median.latency.p99 ?? 0))}`).join('; '),
    ''
  ]
}

async function main (): Promise<void> {
  let options: BenchOptions | null
  try {
    options = parseBenchArgs(process.argv.slice(2), DEFAULT_OUT)
  } catch (err) {
    if (!(err instanceof UsageError)) throw err
    process.stderr.write(`${err.message}\n\n${USAGE}`)
    process.exit(2)
  }
  if (options === null) {
    process.stdout.write(USAGE)
    return
  }
  try {
    await run(options)
  } finally {
    await cleanup()
  }
}

main().then(() => { if (!interrupted) process.exit(0) }, (err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? err.message : String(err)}\n`)
  process.exit(1)
})
