// The deployment files are read, not run (no Docker engine in CI): these checks tie
// docker-compose.yml and the Dockerfile to what the code actually reads and ships.
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { parse } from 'yaml'
import { ENV_VARIABLES, loadConfig } from '../../gateway/src/config/env.js'
import { docSnippet } from '../helpers/docs.js'
import { copyOf, dockerStages, execForm, type Stage } from '../helpers/dockerfile.js'

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
  t.same(argv, ['node', 'dist/upstream-stub/src/server.js'], 'the stub runs compiled, on plain node')
  t.ok(existsSync(join(ROOT, 'upstream-stub/src/server.ts')), 'compiled from upstream-stub/src/server.ts')
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

t.test('the Dockerfile builds in one stage and runs compiled code, unprivileged, in a slim one', async (t) => {
  t.ok(existsSync(DOCKERFILE), 'Dockerfile exists at the repository root')
  const stages = dockerStages(DOCKERFILE)
  t.equal(stages.length, 2, 'two stages: build and runtime')
  const [build, runtime] = stages as [Stage, Stage]
  t.equal(build.name, 'build')
  for (const stage of stages) t.match(stage.image, /^node:24(-bookworm)?-slim$/, `stage ${stage.name ?? '(runtime)'} is on node:24 slim`)
  t.ok(build.all('RUN').some((i) => /\bnpm run build\b/.test(i.args)), 'the build stage runs npm run build')

  const user = runtime.all('USER').at(-1)?.args.split(':')[0]
  t.ok(user, 'the runtime stage sets a USER')
  t.notOk(user === undefined || user === 'root' || user === '0', `the final USER (${user}) is not root`)

  const cmdArgv = execForm(runtime.all('CMD').at(-1)?.args)
  t.ok(cmdArgv, 'CMD is in exec (JSON array) form, so node gets SIGTERM itself')
  t.same(cmdArgv, ['node', 'dist/gateway/src/main.js'], 'CMD runs the compiled gateway on plain node')
  t.ok(existsSync(join(ROOT, 'gateway/src/main.ts')), 'which is compiled from gateway/src/main.ts')
  t.ok(runtime.all('COPY').some((i) => copyOf(i).from === 'build' && copyOf(i).sources.includes('/src/dist/')),
    'the runtime stage takes dist/ from the build stage')

  const env = runtime.all('ENV').map((i) => i.args).join(' ')
  t.match(env, /\bHOST=0\.0\.0\.0\b/, 'ENV HOST=0.0.0.0')
  t.match(env, /\bNODE_ENV=production\b/, 'ENV NODE_ENV=production')
  t.ok(runtime.all('EXPOSE').some((i) => i.args.split(/\s+/).includes('8080')), 'EXPOSE 8080')

  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> }
  t.match(runtime.all('RUN').map((i) => i.args).join(' '), /npm ci\b.*--omit=dev/, 'runtime dependencies come from npm ci --omit=dev')
  for (const devTool of ['tsx', 'typescript', 'esbuild']) t.notOk(pkg.dependencies?.[devTool], `${devTool} is not a runtime dependency`)

  for (const copy of stages.flatMap((stage) => stage.all('COPY'))) {
    const { from, sources } = copyOf(copy)
    if (from !== undefined) continue
    for (const source of sources) t.ok(existsSync(join(ROOT, source)), `COPY source ${source} exists`)
  }

  const health = runtime.all('HEALTHCHECK').at(-1)?.args ?? ''
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
  const { routeWarnings } = await import('../../gateway/src/proxy/route-aliases.js')
  t.same(routeWarnings(routes).map((w) => w.text), [], 'no route forwards into a stronger route\'s path space')
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

// docs/getting-started.md, "Docker Compose": the command cannot run here (no Docker engine); what
// it relies on is checked instead. Its variable is the one the compose file requires, with a
// value keygate accepts as a bootstrap user; `--build` builds the image of the services that
// have a build: (test/system/docker-image.test.ts assembles that image and runs it).
t.test('the Docker Compose command of docs/getting-started.md fits the compose file', async (t) => {
  const block = docSnippet('docs/getting-started.md', 'Docker Compose', 'sh')
  const match = /^KEYGATE_BOOTSTRAP_USERS='([^']+)' docker compose up --build$/m.exec(block)
  t.ok(match, 'one variable, then docker compose up --build')
  const { services } = loadCompose()
  t.match(envOf(services.gateway).KEYGATE_BOOTSTRAP_USERS, /^\$\{KEYGATE_BOOTSTRAP_USERS:?\?/, 'the variable the compose file requires')
  t.match(loadConfig({ KEYGATE_BOOTSTRAP_USERS: match?.[1] ?? '' }).bootstrapUsers, [{ username: 'alice', password: 'a-long-secret' }],
    'a value keygate reads as the user alice')
  t.same(Object.keys(services).filter((name) => services[name]?.build !== undefined).sort(), ['gateway', 'upstream'],
    '--build builds the gateway and upstream image')
  t.ok(readFileSync(COMPOSE_FILE, 'utf8').includes(match?.[0] ?? 'no command'), 'the compose file\'s own comment says the same command')
})
