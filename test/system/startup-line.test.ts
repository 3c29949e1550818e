// The startup line, as an operator reads it in the first lines of a real process's stdout (pino
// JSON lines): where keygate listens, on which store (never a password), with how many routes and
// workers, on which metrics and admin ports (or that there is none). main.ts alone, main.ts as a
// cluster's primary, and npm start (scripts/start.ts) all say it, once.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t, { type Test } from 'tap'
import { describeRedis } from '../../gateway/src/store/redis-connection.js'
import { send } from '../helpers/http.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { routeFile } from '../helpers/routes.js'
import { compiled } from '../helpers/build.js'
import { TYPESCRIPT_NODE_ARGS } from '../helpers/typescript-node.js'

const root = fileURLToPath(new URL('../..', import.meta.url))
const WAIT_MS = 30_000
/** main.ts compiled; npm start runs scripts/start.ts under tsx, as its npm script does */
const MAIN = [await compiled('gateway/src/main.ts')]
const NPM_START = [...TYPESCRIPT_NODE_ARGS, 'scripts/start.ts']

interface StartupFacts { url: string; store: string; routes: number; workers: number; metricsPort: number | 'off'; adminPort: string; decisionPort: string }
type LogLine = Record<string, unknown> & { pid: number; msg: string; startup?: StartupFacts }

interface Started {
  pid: number
  /** the startup line */
  line: LogLine
  /** SIGTERM, then every line the process tree wrote, once it has exited */
  stop: () => Promise<{ code: number | null; lines: LogLine[] }>
}

/** Starts `node ...argv` as its own process and resolves with its startup line. */
async function start (t: Test, argv: string[], env: Record<string, string>): Promise<Started> {
  const script = argv.at(-1) ?? ''
  const child = spawn(process.execPath, argv, {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', PORT: '0', ...env }
  })
  t.teardown(() => { child.kill('SIGKILL') })
  const lines: LogLine[] = []
  let buffered = ''
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  // 'close', not 'exit': by then stdout has given every line
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => { resolve(code) }))
  const line = await new Promise<LogLine>((resolve, reject) => {
    const timer = setTimeout(() => { reject(new Error(`${script} logged no startup line within ${WAIT_MS} ms: ${stderr}`)) }, WAIT_MS)
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString()
      const complete = buffered.split('\n')
      buffered = complete.pop() ?? ''
      for (const text of complete) {
        let parsed: LogLine
        try { parsed = JSON.parse(text) as LogLine } catch { continue }
        lines.push(parsed)
        if (parsed.startup !== undefined) { clearTimeout(timer); resolve(parsed) }
      }
    })
    void exited.then((code) => { clearTimeout(timer); reject(new Error(`${script} exited (${code}) before its startup line: ${stderr}`)) })
  })
  return {
    pid: child.pid ?? 0,
    line,
    stop: async () => {
      child.kill('SIGTERM')
      const code = await exited
      return { code, lines }
    }
  }
}

/** A Redis URL with a password in it: the test Redis's own, or one it accepts (a user without a password takes any). */
async function redisWithPassword (t: Test): Promise<{ env: Record<string, string>; url: string; password: string }> {
  const base = await testRedisUrl()
  const url = new URL(base)
  if (url.password === '') {
    url.username = 'default'
    url.password = 'Startup-Secret-42'
  }
  const prefix = uniquePrefix('startup')
  t.teardown(async () => { await deletePrefix(base, prefix) })
  return { env: { REDIS_URL: url.toString(), KEYGATE_REDIS_PREFIX: prefix }, url: url.toString(), password: decodeURIComponent(url.password) }
}

t.test('main.ts on the embedded store, with a metrics listener: one line says where and with what', async (t) => {
  const gw = await start(t, MAIN, { KEYGATE_METRICS_PORT: '0' })
  const facts = gw.line.startup
  t.match(gw.line, { level: 30, pid: gw.pid })
  t.match(facts, { url: /^http:\/\/127\.0\.0\.1:\d+$/, store: 'embedded', routes: 2, workers: 1, metricsPort: Number, adminPort: 'off', decisionPort: 'off' })
  t.equal((await send(facts?.url ?? '', '/healthz')).status, 200, 'the url is where it serves')
  t.equal((await send(`http://127.0.0.1:${String(facts?.metricsPort)}`, '/metrics')).status, 200, 'the metrics port is where the metrics are')
  t.equal(gw.line.msg, `keygate listens on ${facts?.url ?? ''} (store embedded, 2 routes, 1 worker, metrics on port ${String(facts?.metricsPort)}, admin off)`)
  const { code, lines } = await gw.stop()
  t.equal(code, 0)
  t.equal(lines.filter((l) => l.startup !== undefined).length, 1, 'said once')
})

t.test('a password cost below OWASP\'s: a warning at start, naming the variable; none at the default', async (t) => {
  const warnings = async (env: Record<string, string>): Promise<string[]> => {
    const gw = await start(t, MAIN, env)
    const { lines } = await gw.stop()
    return lines.filter((l) => l.level === 40 && l.msg.startsWith('KEYGATE_PASSWORD_SCRYPT_LOG_N')).map((l) => l.msg)
  }
  t.same(await warnings({ KEYGATE_PASSWORD_SCRYPT_LOG_N: '14' }), [
    'KEYGATE_PASSWORD_SCRYPT_LOG_N=14: the password hashes written here cost 8 times less to guess than at OWASP\'s recommended 17; for development and tests'
  ])
  t.same(await warnings({}), [], 'the default: no warning')
})

t.test('main.ts with the admin API and decision mode: their ports in the line, and each answers there', async (t) => {
  const token = 'k'.repeat(40)
  const gw = await start(t, MAIN, {
    KEYGATE_ADMIN_PORT: '0', KEYGATE_ADMIN_TOKEN: token, KEYGATE_DECISION_PORT: '0', KEYGATE_DECISION_TRUSTED_PROXIES: '127.0.0.1'
  })
  const facts = gw.line.startup
  t.match(facts, { store: 'embedded', metricsPort: 'off', adminPort: Number, decisionPort: Number })
  t.match(gw.line.msg, new RegExp(`, metrics off, admin on port ${String(facts?.adminPort)}, decisions on port ${String(facts?.decisionPort)}\\)$`))
  const adminUrl = `http://127.0.0.1:${String(facts?.adminPort)}`
  t.equal((await send(adminUrl, '/v1/users')).status, 401, 'the admin API is on that port')
  t.equal((await send(adminUrl, '/v1/users', { headers: { authorization: `Bearer ${token}` } })).status, 200)
  const decision = await send(`http://127.0.0.1:${String(facts?.decisionPort)}`, '/decide/nginx', {
    headers: { 'x-original-method': 'GET', 'x-original-uri': '/v1/clients/', 'x-forwarded-host': 'api.test', 'x-original-content-length': '0' }
  })
  t.same([decision.status, decision.headers['x-keygate-status']], [403, '401'], 'the decision listener is on that port: no token, refused as nginx takes it')
  const { code, lines } = await gw.stop()
  t.equal(code, 0)
  t.notOk(JSON.stringify(lines).includes(token), 'the token is in no line')
})

t.test('main.ts on Redis with a route file: the store named without its password, the file\'s routes counted', async (t) => {
  const redis = await redisWithPassword(t)
  const file = routeFile(t, [
    'routes:',
    '  - { prefix: /a/, upstream: "http://127.0.0.1:9", auth: public }',
    '  - { prefix: /b/, upstream: "http://127.0.0.1:9", auth: bearer }',
    '  - { path: /c, upstream: "http://127.0.0.1:9", auth: signed }',
    ''
  ].join('\n'))
  const gw = await start(t, MAIN, { ...redis.env, KEYGATE_ROUTES: file.path })
  t.match(gw.line.startup, { store: describeRedis(redis.url), routes: 3, workers: 1, metricsPort: 'off', adminPort: 'off' })
  t.match(gw.line.msg, / \(store redis:\/\/.*127\.0\.0\.1:\d+.*, 3 routes, 1 worker, metrics off, admin off\)$/)
  t.notOk(JSON.stringify(gw.line).includes(redis.password), 'the Redis password is not in the line')
  t.equal((await gw.stop()).code, 0)
})

t.test('main.ts as a cluster\'s primary: the primary says it for its workers, which do not', async (t) => {
  const redis = await redisWithPassword(t)
  const gw = await start(t, MAIN, { ...redis.env, KEYGATE_WORKERS: '2' })
  t.equal(gw.line.pid, gw.pid, 'the primary logs it')
  t.match(gw.line, { name: 'keygate-primary' })
  t.match(gw.line.startup, { store: describeRedis(redis.url), routes: 2, workers: 2, metricsPort: 'off', adminPort: 'off' })
  t.match(gw.line.msg, /^keygate listens on http:\/\/\S+ \(store .*, 2 routes, 2 workers, metrics off, admin off\)$/)
  t.notOk(JSON.stringify(gw.line).includes(redis.password), 'the Redis password is not in the line')
  t.equal((await send(gw.line.startup?.url ?? '', '/healthz')).status, 200, 'the workers serve the url')
  const { code, lines } = await gw.stop()
  t.equal(code, 0)
  t.same(lines.filter((l) => l.startup !== undefined).map((l) => l.pid), [gw.pid], 'said once, by the primary alone')
})

t.test('npm start: the same line, then where the example service listens', async (t) => {
  const gw = await start(t, NPM_START, { UPSTREAM_PORT: '0' })
  t.match(gw.line.startup, { url: /^http:\/\/127\.0\.0\.1:\d+$/, store: 'embedded', routes: 2, workers: 1, metricsPort: 'off', adminPort: 'off' })
  t.equal((await send(gw.line.startup?.url ?? '', '/healthz')).status, 200)
  const portal = `${gw.line.startup?.url ?? ''}/portal/`
  t.equal((await send(gw.line.startup?.url ?? '', '/portal/')).status, 200, 'the developer portal is served')
  const { code, lines } = await gw.stop()
  t.equal(code, 0)
  t.equal(lines.filter((l) => l.startup !== undefined).length, 1, 'said once')
  t.ok(lines.some((l) => /^forwarding \/v1\/clients\/ to http:\/\/127\.0\.0\.1:\d+/.test(l.msg)), 'and where the routes go')
  t.ok(lines.some((l) => l.msg.startsWith(`developer portal: ${portal} in a browser (log in as demo`)), 'and where the developer portal is')
})
