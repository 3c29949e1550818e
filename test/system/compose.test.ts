// The deployment files are read, not run (no Docker engine in CI): these checks tie
// docker-compose.yml and the Dockerfile to what the code actually reads and ships.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { parse } from 'yaml'
import { ENV_VARIABLES } from '../../gateway/src/config/env.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const COMPOSE_FILE = join(ROOT, 'docker-compose.yml')
const DOCKERFILE = join(ROOT, 'Dockerfile')

type Service = Record<string, unknown>

function isRecord (value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

function loadCompose (): { services: Record<string, Service>, volumes: Record<string, unknown> } {
  const doc: unknown = parse(readFileSync(COMPOSE_FILE, 'utf8'))
  if (!isRecord(doc) || !isRecord(doc.services)) throw new Error('docker-compose.yml has no services mapping')
  const services: Record<string, Service> = {}
  for (const [name, service] of Object.entries(doc.services)) {
    if (!isRecord(service)) throw new Error(`service ${name} is not a mapping`)
    services[name] = service
  }
  return { services, volumes: isRecord(doc.volumes) ? doc.volumes : {} }
}

/** `environment:` as a map or as a list of NAME=value; every value as the string compose sees. */
function envOf (service: Service | undefined): Record<string, string> {
  const env = service?.environment
  if (env === undefined || env === null) return {}
  const out: Record<string, string> = {}
  if (Array.isArray(env)) {
    for (const entry of env) {
      const text = String(entry)
      const eq = text.indexOf('=')
      if (eq === -1) out[text] = ''
      else out[text.slice(0, eq)] = text.slice(eq + 1)
    }
    return out
  }
  if (!isRecord(env)) throw new Error('environment is neither a list nor a mapping')
  for (const [name, value] of Object.entries(env)) out[name] = value === null ? '' : String(value)
  return out
}

/** `command:` as compose would split it (a string is split on whitespace, good enough here). */
function commandOf (service: Service | undefined): string[] {
  const command = service?.command
  if (command === undefined || command === null) return []
  if (Array.isArray(command)) return command.map(String)
  return String(command).trim().split(/\s+/)
}

interface Instruction { keyword: string, args: string }

/** Dockerfile instructions with line continuations joined and comments dropped. */
function dockerInstructions (text: string): Instruction[] {
  const logical: string[] = []
  let current = ''
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (current === '' && (line === '' || line.startsWith('#'))) continue
    if (line.startsWith('#')) continue
    if (line.endsWith('\\')) {
      current += line.slice(0, -1) + ' '
      continue
    }
    logical.push(current + line)
    current = ''
  }
  if (current.trim() !== '') logical.push(current)
  return logical.map((line) => {
    const match = /^(\S+)\s*(.*)$/.exec(line.trim())
    return { keyword: (match?.[1] ?? '').toUpperCase(), args: (match?.[2] ?? '').trim() }
  })
}

/** The script a `node [flags] file.ts` command runs: its first argument ending in .ts. */
function scriptOf (argv: string[]): string | undefined {
  return argv.find((arg) => /\.[cm]?[jt]s$/.test(arg))
}

function filesUnder (dir: string): string[] {
  const out: string[] = []
  for (const name of readdirSync(dir)) {
    const full = join(dir, name)
    if (statSync(full).isDirectory()) out.push(...filesUnder(full))
    else out.push(full)
  }
  return out
}

t.test('docker-compose.yml defines redis, upstream and gateway', async (t) => {
  t.ok(existsSync(COMPOSE_FILE), 'docker-compose.yml exists at the repository root')
  const { services } = loadCompose()
  for (const name of ['redis', 'upstream', 'gateway']) t.ok(services[name], `service ${name} exists`)
  t.ok(services.upstream?.build !== undefined, 'upstream is built from the repository image')
  t.ok(services.gateway?.build !== undefined, 'gateway is built from the repository image')
})

t.test('redis keeps its data: append-only file on, /data on a named volume', async (t) => {
  const { services, volumes } = loadCompose()
  const redis = services.redis
  t.match(String(redis?.image), /^redis:/, 'redis uses a redis image')
  const argv = commandOf(redis)
  t.equal(argv[0], 'redis-server', 'the command starts redis-server')
  const flag = argv.indexOf('--appendonly')
  t.not(flag, -1, 'redis-server gets --appendonly')
  t.equal(argv[flag + 1], 'yes', '--appendonly is yes')

  const mounts = Array.isArray(redis?.volumes) ? redis.volumes.map(String) : []
  const dataMount = mounts.find((m) => m.split(':')[1] === '/data')
  t.ok(dataMount, 'a volume is mounted on /data')
  const source = dataMount?.split(':')[0] ?? ''
  t.ok(source in volumes, `the /data volume (${source}) is a named volume declared under volumes:`)

  const test = redis?.healthcheck
  t.ok(isRecord(test) && Array.isArray(test.test) && test.test.map(String).join(' ').includes('redis-cli ping'),
    'redis has a redis-cli ping healthcheck')
})

t.test('the gateway sets only environment variables the code reads', async (t) => {
  const { services } = loadCompose()
  const env = envOf(services.gateway)
  const names = Object.keys(env)
  t.ok(names.length > 0, 'the gateway service sets environment variables')
  const known = new Set<string>(ENV_VARIABLES)
  for (const name of names) t.ok(known.has(name), `${name} is one of ENV_VARIABLES in gateway/src/config/env.ts`)
  t.equal(env.HOST, '0.0.0.0', 'the gateway listens on every interface of its container')
  t.ok(Array.isArray(services.gateway?.ports) && services.gateway.ports.map(String).includes(`${env.PORT}:${env.PORT}`),
    'the gateway publishes the port it listens on')
})

t.test('the upstream service sets only variables the stub reads, and runs a file that exists', async (t) => {
  const { services } = loadCompose()
  const stubSource = readFileSync(join(ROOT, 'upstream-stub/src/server.ts'), 'utf8')
  const read = new Set([...stubSource.matchAll(/process\.env(?:\.(\w+)|\[\s*['"](\w+)['"]\s*\])/g)].map((m) => m[1] ?? m[2]))
  const env = envOf(services.upstream)
  t.ok(Object.keys(env).length > 0, 'the upstream service sets environment variables')
  for (const name of Object.keys(env)) t.ok(read.has(name), `upstream-stub/src/server.ts reads ${name}`)
  t.equal(env.HOST, '0.0.0.0', 'the stub listens on every interface of its container')

  const argv = commandOf(services.upstream)
  t.same(argv.slice(0, 3), ['node', '--import', 'tsx'], 'the stub runs through tsx like npm run start:upstream')
  const script = scriptOf(argv)
  t.ok(script, 'the upstream command names a script')
  t.ok(script !== undefined && existsSync(join(ROOT, script)), `${script} exists in the repository`)
})

t.test('the gateway reaches redis and upstream by their service names', async (t) => {
  const { services } = loadCompose()
  const env = envOf(services.gateway)
  t.ok(env.REDIS_URL, 'REDIS_URL is set')
  t.ok(env.UPSTREAM_URL, 'UPSTREAM_URL is set')
  const redisUrl = new URL(env.REDIS_URL ?? 'invalid:')
  t.match(redisUrl.protocol, /^rediss?:$/, 'REDIS_URL is a redis URL')
  t.equal(redisUrl.hostname, 'redis', 'REDIS_URL points at the redis service')
  t.ok(services[redisUrl.hostname], 'the REDIS_URL host is a service of the file')

  const upstreamUrl = new URL(env.UPSTREAM_URL ?? 'invalid:')
  t.equal(upstreamUrl.hostname, 'upstream', 'UPSTREAM_URL points at the upstream service')
  t.ok(services[upstreamUrl.hostname], 'the UPSTREAM_URL host is a service of the file')
  t.equal(upstreamUrl.port, envOf(services.upstream).UPSTREAM_PORT, 'UPSTREAM_URL uses the port the stub listens on')

  const dependsOn = services.gateway?.depends_on
  t.ok(isRecord(dependsOn), 'the gateway depends_on is a mapping with conditions')
  if (isRecord(dependsOn)) {
    t.ok(isRecord(dependsOn.redis) && dependsOn.redis.condition === 'service_healthy', 'the gateway waits for a healthy redis')
    t.ok('upstream' in dependsOn, 'the gateway depends on upstream')
  }
})

t.test('no password is built in', async (t) => {
  const { services } = loadCompose()
  const users = envOf(services.gateway).KEYGATE_BOOTSTRAP_USERS
  t.match(users ?? '', /^\$\{KEYGATE_BOOTSTRAP_USERS:?\?[^}]*\}$/,
    // eslint-disable-next-line no-template-curly-in-string -- the compose file's own ${...} syntax, quoted
    'KEYGATE_BOOTSTRAP_USERS is a required substitution (${KEYGATE_BOOTSTRAP_USERS:?message}) and nothing else')
  for (const [serviceName, service] of Object.entries(services)) {
    for (const [name, value] of Object.entries(envOf(service))) {
      // ${VAR:-default} / ${VAR-default}: a value the operator did not choose.
      t.notMatch(value, /\$\{\w+:?-[^}]+\}/, `${serviceName}.${name} has no substitution default`)
      // scheme://user:password@host
      t.notMatch(value, /^\w[\w+.-]*:\/\/[^/@]*:[^/@]*@/, `${serviceName}.${name} carries no credentials in a URL`)
      if (/PASSWORD|USERS|SECRET|TOKEN/i.test(name)) {
        t.match(value, /^\$\{\w+:?\?[^}]*\}$/, `${serviceName}.${name} must come from the operator`)
      }
    }
  }
})

t.test('the Dockerfile runs unprivileged a file that exists', async (t) => {
  t.ok(existsSync(DOCKERFILE), 'Dockerfile exists at the repository root')
  const instructions = dockerInstructions(readFileSync(DOCKERFILE, 'utf8'))
  const all = (keyword: string): Instruction[] => instructions.filter((i) => i.keyword === keyword)

  t.match(all('FROM')[0]?.args ?? '', /^node:24(-bookworm)?-slim\b/, 'the base image is node:24 slim')

  const user = all('USER').at(-1)?.args.split(':')[0]
  t.ok(user, 'the Dockerfile sets a USER')
  t.notOk(user === undefined || user === 'root' || user === '0', `the final USER (${user}) is not root`)

  const cmd = all('CMD').at(-1)
  t.ok(cmd, 'the Dockerfile has a CMD')
  let argv: unknown
  try { argv = JSON.parse(cmd?.args ?? '') } catch { argv = undefined }
  t.ok(Array.isArray(argv), 'CMD is in exec (JSON array) form, so node gets SIGTERM itself')
  const cmdArgv = Array.isArray(argv) ? argv.map(String) : []
  t.same(cmdArgv.slice(0, 3), ['node', '--import', 'tsx'], 'CMD runs node with the tsx loader')
  const script = scriptOf(cmdArgv)
  t.ok(script !== undefined && existsSync(join(ROOT, script)), `the CMD script ${script} exists in the repository`)
  t.equal(script, 'gateway/src/main.ts', 'the default CMD runs the gateway')

  const env = all('ENV').map((i) => i.args).join(' ')
  t.match(env, /\bHOST=0\.0\.0\.0\b/, 'ENV HOST=0.0.0.0')
  t.ok(all('EXPOSE').some((i) => i.args.split(/\s+/).includes('8080')), 'EXPOSE 8080')

  // --omit=dev must keep the loader the CMD depends on.
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> }
  const install = all('RUN').map((i) => i.args).join(' ')
  t.match(install, /npm ci\b.*--omit=dev/, 'dependencies come from npm ci --omit=dev')
  t.ok(pkg.dependencies?.tsx, 'tsx is a runtime dependency, so the production install has it')

  // Every COPY source exists in the build context.
  for (const copy of all('COPY')) {
    const parts = copy.args.split(/\s+/).filter((p) => !p.startsWith('--'))
    for (const source of parts.slice(0, -1)) t.ok(existsSync(join(ROOT, source)), `COPY source ${source} exists`)
  }

  const health = all('HEALTHCHECK').at(-1)?.args ?? ''
  t.match(health, /\/healthz/, 'the HEALTHCHECK probes /healthz')
  t.notMatch(health, /\b(curl|wget)\b/, 'the HEALTHCHECK uses no tool the slim image lacks')
  const gatewaySources = filesUnder(join(ROOT, 'gateway/src')).filter((f) => f.endsWith('.ts'))
  t.ok(gatewaySources.some((f) => readFileSync(f, 'utf8').includes("'/healthz'")), 'the gateway serves /healthz')
})

t.test('.dockerignore keeps dependencies, history and keys out of the build context', async (t) => {
  const file = join(ROOT, '.dockerignore')
  t.ok(existsSync(file), '.dockerignore exists')
  const patterns = existsSync(file) ? readFileSync(file, 'utf8').split('\n').map((l) => l.trim()) : []
  for (const pattern of ['node_modules', '.git', '*.pem']) t.ok(patterns.includes(pattern), `.dockerignore lists ${pattern}`)
})

t.test('the gateway runs with a mounted route file that is valid, for the services compose runs', async (t) => {
  const { loadRouteFile } = await import('../../gateway/src/proxy/route-file.js')
  const compose = parse(readFileSync(COMPOSE_FILE, 'utf8')) as {
    services: Record<string, { environment?: Record<string, string>; volumes?: string[] }>
  }
  const gateway = compose.services.gateway
  const routesPath = gateway?.environment?.KEYGATE_ROUTES
  t.ok(routesPath, 'KEYGATE_ROUTES is set')
  const mount = gateway?.volumes?.map((v) => v.split(':')).find(([, target]) => target === routesPath)
  t.ok(mount, 'the route file is mounted where KEYGATE_ROUTES points')
  const source = join(ROOT, mount?.[0] ?? 'missing')
  t.ok(existsSync(source), `${mount?.[0]} exists`)
  const routes = await loadRouteFile(source, { upstream: 'http://unused', bodyLimit: 1024, timeoutMs: 1000 })
  const services = Object.keys(compose.services)
  for (const route of routes) {
    t.ok(services.includes(new URL(route.upstream).hostname), `${route.name} goes to a compose service`)
  }
  const upstreamEnv = compose.services.upstream?.environment ?? {}
  t.equal(upstreamEnv.UPSTREAM_JWKS_URL, 'http://gateway:8080/.well-known/jwks.json', 'the example service checks tokens against the gateway')
  const toUpstream = routes.filter((r) => new URL(r.upstream).hostname === 'upstream' && r.auth !== 'public')
  t.ok(toUpstream.length > 0)
  for (const route of toUpstream) {
    t.ok(route.identityToken, `${route.name} sends the identity token the service requires`)
    t.equal(route.identityToken?.audience, upstreamEnv.UPSTREAM_IDENTITY_AUDIENCE, `${route.name}: its audience is the one the service checks`)
  }
})

t.test('Redis fsyncs every write, so a 201 survives a crash', async (t) => {
  const compose = parse(readFileSync(COMPOSE_FILE, 'utf8')) as { services: Record<string, { command?: string[] }> }
  const command = compose.services.redis?.command ?? []
  t.equal(command[command.indexOf('--appendfsync') + 1], 'always')
  t.equal(command[command.indexOf('--appendonly') + 1], 'yes')
})
