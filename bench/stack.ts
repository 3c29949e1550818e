// The stack a run starts when it is given no --url: each in its own process on a free loopback
// port, the example service (a), the bare proxy (b), keygate in each configuration asked for (c,
// d, e, f, h, i, j, k, l, m, n: its environment, its Redis prefix, its files), the bench's IdP (i), nginx (g,
// h), the bench's MCP server (--scenario mcp) and an OTLP sink (--trace); then the configurations over them, logged in and with the
// bench's key registered. Each start registers its undoing (cleanup.ts).
import { randomBytes, randomUUID } from 'node:crypto'
import { resolve } from 'node:path'
import { ENV_VARIABLES } from '../gateway/src/config/env.js'
import type { BenchOptions, ConfigId } from './args.js'
import { startService, stopAllServices, type Service } from './children.js'
import { onCleanup } from './cleanup.js'
import { agentConfig, directConfig, dpopConfig, keygateConfig, LABELS, type BenchConfig } from './configurations.js'
import { agentRouteFile, agentsFile, bearerRouteFile, limitedRouteFile, publicRouteFile } from './gateway-files.js'
import { BENCH_IDP_AUDIENCE, BENCH_IDP_NAME, startBenchIssuer, type BenchIssuer } from './idp.js'
import { findNginx, freePort, loadDecisionConfig, plainConfig, startNginx, type RunningNginx } from './nginx.js'
import { deletePrefix, pingRedis, redisClient, redisCpuMicros } from './redis.js'
import type { BenchKey } from './signing.js'
import { startTraceSink, traceEnv, type TraceSink } from './trace-sink.js'

export interface OwnSetup {
  configs: BenchConfig[]
  /** every process started, for the report (and a test that checks they are gone) */
  services: Array<{ name: string; pid: number; url: string }>
  redisPrefix: string | undefined
  /** --trace: where the gateways' spans go */
  traceSink?: TraceSink | undefined
}

async function checkRedis (url: string): Promise<void> {
  try {
    await pingRedis(url)
  } catch (err) {
    throw new Error(`configuration c needs Redis and ${url} does not answer (${(err as Error).message}): ` +
      'start one, set REDIS_URL, or leave c out with --only a,b,d')
  }
}

/** The environment of a keygate child: the parent's, minus any keygate setting, plus these. */
function gatewayEnv (settings: Record<string, string>): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env }
  for (const name of ENV_VARIABLES) delete env[name]
  // traces only with --trace: never because the shell that runs the bench exports OTEL_*
  for (const name of Object.keys(env)) if (name.startsWith('OTEL_')) delete env[name]
  return { ...env, ...settings }
}

type GatewayId = 'c' | 'd' | 'e' | 'f' | 'h' | 'i' | 'j' | 'k' | 'l' | 'm' | 'n'
/** starts keygate (id), its one user `username`, with `extra` settings over what every gateway here gets */
type StartGateway = (id: GatewayId, username: string, extra: Record<string, string>) => Promise<Service>

function gatewayStarter (options: BenchOptions, upstreamUrl: string, password: string, traced: Record<string, string>, profiled: string[]): StartGateway {
  return async (id, username, extra) =>
    await startService(`keygate (${id})`, 'keygate', gatewayEnv({
      PORT: '0',
      HOST: '127.0.0.1',
      UPSTREAM_URL: upstreamUrl,
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
}

/** a Redis key prefix of a gateway's own, deleted once no gateway can write under it any more */
function ownPrefix (redisUrl: string): string {
  const prefix = `keygate-bench:${randomUUID()}:`
  onCleanup(async () => {
    await stopAllServices()
    await deletePrefix(redisUrl, prefix)
  })
  return prefix
}

/** the Redis prefixes of the gateways on Redis (c, f, i, j, l, m, n), and the IdP that i trusts */
interface OnRedis { redisUrl: string; c?: string; f?: string; i?: string; j?: string; l?: string; m?: string; n?: string; idp?: BenchIssuer }

const DPOP_IDS = ['l', 'm', 'n'] as const

/** The processes besides the example service: the bare proxy (b), each keygate asked for, the MCP server (--scenario mcp). */
type Started = Partial<Record<'b' | GatewayId | 'mcp', Service>>

async function startProxies (want: Set<ConfigId>, options: BenchOptions, keyReady: Promise<BenchKey>, upstream: Service,
  gateway: StartGateway, redis: OnRedis, profiled: string[], mcp: Service | undefined): Promise<Started> {
  const { redisUrl, idp } = redis
  // --scenario mcp: the MCP path to the bench's MCP server, a public route (e) or a public MCP route (k)
  const publicRoutes = (policy: boolean): string => publicRouteFile(upstream.url, mcp === undefined ? undefined : { upstream: mcp.url, policy })
  // --scenario dpop (l, m, n): /v1/clients/ a bearer route; a proof's iat must stay within the window for the
  // whole measurement (its proofs are made before it, in seconds): wider than the default 60 s only for a long one
  const iatWindow = String(Math.max(60, options.warmup + options.duration + 30))
  const dpopGateway = (id: 'l' | 'm' | 'n'): Promise<Service> | undefined => want.has(id)
    ? gateway(id, 'bench-dpop', {
      REDIS_URL: redisUrl,
      KEYGATE_REDIS_PREFIX: redis[id] as string,
      BENCH_OWNS_PREFIX: '1',
      KEYGATE_WORKERS: String(options.workers),
      KEYGATE_ROUTES: bearerRouteFile(upstream.url),
      KEYGATE_DPOP_IAT_WINDOW_SECONDS: options.gatewayEnv.KEYGATE_DPOP_IAT_WINDOW_SECONDS ?? iatWindow
    })
    : undefined
  const [b, c, d, e, f, h, i, j, k, l, m, n] = await Promise.all([
    want.has('b') ? startService('bare proxy', 'bare', { ...process.env, BENCH_UPSTREAM_URL: upstream.url }, profiled) : undefined,
    // BENCH_OWNS_PREFIX: should this process die, the gateway deletes the prefix itself
    want.has('c')
      ? gateway('c', 'bench-redis', {
        REDIS_URL: redisUrl, KEYGATE_REDIS_PREFIX: redis.c as string, BENCH_OWNS_PREFIX: '1', KEYGATE_WORKERS: String(options.workers)
      })
      : undefined,
    // the embedded store lives in one process: always one
    want.has('d') ? gateway('d', 'bench-memory', { KEYGATE_WORKERS: '1' }) : undefined,
    want.has('e') ? gateway('e', 'bench-public', { KEYGATE_ROUTES: publicRoutes(false), KEYGATE_WORKERS: '1' }) : undefined,
    want.has('f')
      ? gateway('f', 'bench-limited', {
        REDIS_URL: redisUrl,
        KEYGATE_REDIS_PREFIX: redis.f as string,
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
        KEYGATE_REDIS_PREFIX: redis.i as string,
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
        KEYGATE_REDIS_PREFIX: redis.j as string,
        BENCH_OWNS_PREFIX: '1',
        KEYGATE_WORKERS: String(options.workers),
        KEYGATE_ROUTES: agentRouteFile(upstream.url),
        KEYGATE_AGENT_DIRECTORIES: agentsFile(key)
      }))
      : undefined,
    want.has('k') ? gateway('k', 'bench-mcp', { KEYGATE_ROUTES: publicRoutes(true), KEYGATE_WORKERS: '1' }) : undefined,
    ...DPOP_IDS.map(dpopGateway)
  ])
  return { b, c, d, e, f, h, i, j, k, l, m, n, mcp }
}

interface OwnNginx { running: RunningNginx; g: string | undefined; h: string | undefined }

/** g and h: one nginx, a server (port) for each */
async function startOwnNginx (want: Set<ConfigId>, options: BenchOptions, binary: string, upstream: Service, decisionGateway: Service | undefined,
  decisionConfig: ReturnType<typeof loadDecisionConfig> | undefined): Promise<OwnNginx> {
  // at once, so that the two are different ports
  const [gPort, hPort] = await Promise.all([freePort(), freePort()])
  const decisionUrl = decisionGateway?.decisionUrl
  if (decisionGateway !== undefined && decisionUrl === undefined) throw new Error('keygate (h) did not report its decision listener')
  const servers = [
    want.has('g') ? plainConfig(gPort, upstream.url) : '',
    decisionConfig !== undefined && decisionUrl !== undefined ? decisionConfig(hPort, decisionUrl, upstream.url) : ''
  ].join('\n')
  const ports = [...(want.has('g') ? [gPort] : []), ...(want.has('h') ? [hPort] : [])]
  const running = await startNginx(binary, servers, ports, options.connections)
  onCleanup(running.stop)
  return { running, g: want.has('g') ? `http://127.0.0.1:${gPort}` : undefined, h: want.has('h') ? `http://127.0.0.1:${hPort}` : undefined }
}

/** The configurations over what started: logged in and with the bench's key registered where keygate checks signatures. */
async function configsOf (want: Set<ConfigId>, options: BenchOptions, key: BenchKey, password: string, upstream: Service, started: Started,
  nginx: OwnNginx | undefined, redis: OnRedis): Promise<BenchConfig[]> {
  const { b: bare, c: redisGateway, d: memoryGateway, e: publicGateway, f: limitedGateway, h: decisionGateway, i: idpGateway, j: agentGateway } = started
  const { idp } = redis
  const configs: BenchConfig[] = []
  const upstreamCpu = upstream.cpuMicros
  if (want.has('a')) configs.push(directConfig('a', upstream.url, 'bench-direct', { proxy: upstreamCpu }, 'example service'))
  if (bare !== undefined) configs.push(directConfig('b', bare.url, 'bench-bare', { proxy: bare.cpuMicros, upstream: upstreamCpu }, 'bare proxy'))
  // --scenario mcp: e's and k's load goes to the bench's MCP server
  const publicUpstreamCpu = started.mcp?.cpuMicros ?? upstreamCpu
  if (publicGateway !== undefined) {
    configs.push(directConfig('e', publicGateway.url, 'bench-public', { proxy: publicGateway.cpuMicros, upstream: publicUpstreamCpu }, 'keygate'))
  }
  if (started.k !== undefined) {
    configs.push(directConfig('k', started.k.url, 'bench-public', { proxy: started.k.cpuMicros, upstream: publicUpstreamCpu }, 'keygate'))
  }
  if (nginx?.g !== undefined) configs.push(directConfig('g', nginx.g, 'bench-nginx', { proxy: nginx.running.cpuMicros, upstream: upstreamCpu }, 'nginx'))
  const redisCpu = async (): Promise<() => Promise<number>> => {
    const client = redisClient(redis.redisUrl)
    onCleanup(async () => { client.disconnect() })
    await client.connect()
    return async () => await redisCpuMicros(client)
  }
  // keygate on Redis (c, f, i, j, l, m, n) runs --workers processes
  const onRedisLabel = (id: 'c' | 'f' | 'i' | 'j' | 'l' | 'm' | 'n'): string => options.workers > 1 ? `${LABELS[id]}, ${options.workers} workers` : LABELS[id]
  const onRedisCpuOf = options.workers > 1 ? `keygate (primary and ${options.workers} workers)` : 'keygate'
  // logging in costs a password check each (scrypt): both at once
  const gateways = await Promise.all([
    redisGateway === undefined
      ? undefined
      : keygateConfig('c', onRedisLabel('c'), redisGateway.url, { username: 'bench-redis', password }, key,
        { proxy: redisGateway.cpuMicros, upstream: upstreamCpu, redis: await redisCpu() }, onRedisCpuOf),
    memoryGateway === undefined
      ? undefined
      : keygateConfig('d', LABELS.d, memoryGateway.url, { username: 'bench-memory', password }, key,
        { proxy: memoryGateway.cpuMicros, upstream: upstreamCpu }, 'keygate'),
    limitedGateway === undefined
      ? undefined
      : keygateConfig('f', onRedisLabel('f'), limitedGateway.url, { username: 'bench-limited', password }, key,
        { proxy: limitedGateway.cpuMicros, upstream: upstreamCpu, redis: await redisCpu() }, onRedisCpuOf),
    // the load goes to nginx; what is compared is keygate's CPU (nginx's is measured beside it)
    decisionGateway === undefined || nginx?.h === undefined
      ? undefined
      : keygateConfig('h', LABELS.h, nginx.h, { username: 'bench-decision', password }, key,
        { proxy: decisionGateway.cpuMicros, upstream: upstreamCpu, nginx: nginx.running.cpuMicros }, 'keygate (its decision listener)', decisionGateway.url),
    idpGateway === undefined || idp === undefined
      ? undefined
      : keygateConfig('i', onRedisLabel('i'), idpGateway.url, { idp, subject: 'bench-agent' }, key,
        { proxy: idpGateway.cpuMicros, upstream: upstreamCpu, redis: await redisCpu() }, onRedisCpuOf)
  ])
  for (const config of gateways) if (config !== undefined) configs.push(config)
  const dpopConfigs = await Promise.all(DPOP_IDS.map(async (id) => {
    const gateway = started[id]
    return gateway === undefined
      ? undefined
      : await dpopConfig(id, onRedisLabel(id), gateway.url, { username: 'bench-dpop', password },
        { proxy: gateway.cpuMicros, upstream: upstreamCpu, redis: await redisCpu() }, onRedisCpuOf)
  }))
  for (const config of dpopConfigs) if (config !== undefined) configs.push(config)
  if (agentGateway !== undefined) {
    configs.push(agentConfig(onRedisLabel('j'), agentGateway.url, onRedisCpuOf,
      { proxy: agentGateway.cpuMicros, upstream: upstreamCpu, redis: await redisCpu() }, key))
  }
  configs.sort((x, y) => x.id.localeCompare(y.id))
  // (a) and (b) send a token of the real size: the service ignores it
  const token = configs.find((c) => c.destination.kind === 'keygate')?.destination.token ?? 'x'.repeat(300)
  for (const c of configs) if (c.destination.kind !== 'keygate') c.destination.token = token
  return configs
}

export async function startOwnConfigs (options: BenchOptions, keyReady: Promise<BenchKey>, log: (line: string) => void): Promise<OwnSetup> {
  const want = new Set(options.only)
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  if (['c', 'f', 'i', 'j', ...DPOP_IDS].some((id) => want.has(id as ConfigId))) await checkRedis(redisUrl)
  // before anything starts: say how to get nginx, or that the page of its configuration moved
  const nginxBinary = want.has('g') || want.has('h') ? findNginx(options.nginx) : undefined
  const decisionConfig = want.has('h') ? loadDecisionConfig() : undefined
  onCleanup(stopAllServices)

  log(`starting the example service${want.has('b') ? ', the bare proxy' : ''}${nginxBinary === undefined ? '' : ', nginx'} and keygate ...`)
  const profiles = options.cpuProf ? resolve(options.out, `profiles-${new Date().toISOString().replace(/[:.]/g, '-')}`) : undefined
  const profiled = profiles === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profiles}`]
  if (profiles !== undefined) log(`CPU profiles of the proxies go to ${profiles} (written when they stop)`)
  const upstream = await startService('example service', 'upstream', { ...process.env })
  let traced: Record<string, string> = {}
  let traceSink: TraceSink | undefined
  if (options.trace !== 'off') {
    const sink = traceSink = await startTraceSink()
    onCleanup(sink.close)
    traced = traceEnv(options.trace, sink.url)
    log(`the gateways trace ${options.trace === 'all' ? 'every request' : `${options.trace * 100}% of requests`} to an OTLP sink at ${sink.url}`)
  }
  const password = randomBytes(18).toString('base64url')
  const gateway = gatewayStarter(options, upstream.url, password, traced, profiled)
  const redis: OnRedis = { redisUrl }
  if (want.has('c')) redis.c = ownPrefix(redisUrl)
  if (want.has('f')) redis.f = ownPrefix(redisUrl)
  if (want.has('i')) {
    redis.i = ownPrefix(redisUrl)
    const issuer = redis.idp = await startBenchIssuer()
    onCleanup(issuer.close)
  }
  if (want.has('j')) redis.j = ownPrefix(redisUrl)
  for (const id of DPOP_IDS) if (want.has(id)) redis[id] = ownPrefix(redisUrl)
  const mcp = options.scenario === 'mcp' ? await startService('MCP server', 'mcp', { ...process.env }) : undefined
  const started = await startProxies(want, options, keyReady, upstream, gateway, redis, profiled, mcp)
  const nginx = nginxBinary === undefined ? undefined : await startOwnNginx(want, options, nginxBinary, upstream, started.h, decisionConfig)

  const configs = await configsOf(want, options, await keyReady, password, upstream, started, nginx, redis)
  const services = [upstream, mcp, started.b, started.c, started.d, started.e, started.f, started.h, started.i, started.j, started.k,
    started.l, started.m, started.n]
    .filter((s) => s !== undefined).map(({ name, pid, url }) => ({ name, pid, url }))
  if (nginx !== undefined) services.push({ name: 'nginx', pid: nginx.running.pid, url: [nginx.g, nginx.h].filter((u) => u !== undefined).join(' ') })
  return { configs, services, redisPrefix: redis.c ?? redis.f ?? redis.i ?? redis.j ?? redis.l ?? redis.m ?? redis.n, traceSink }
}
