// A checkout's commands as the pages give them, run with bash and npm as a reader runs them:
// docs/getting-started.md's "From a checkout" (npm run start:upstream, then npm run
// start:gateway in front of it, and npx keygate; npm start is the Metrics run below), what its
// "Which Node" says of npm ci's warnings, and docs/observability.md's
// "Metrics" (npm start with KEYGATE_METRICS_PORT, then curl of /metrics). The pages' ports (8080,
// 8081, 9464) are free ones here (PORT, UPSTREAM_PORT in the environment; 9464 replaced), as a
// shared machine needs.
import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { ROOT } from '../helpers/build.js'
import { docSection, docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { interruptGroup, startCommand, type Listening } from '../helpers/listening.js'
import { freePort } from '../helpers/redis.js'

t.setTimeout(120_000)
// the two starts side by side: each waits mostly for its processes to load
t.jobs = 2

/** `line` with bash in the checkout, in a process group of its own (stopped as Ctrl-C would), once its stdout matches `ready` */
async function started (t: Test, line: string, env: Record<string, string>, ready: RegExp): Promise<Listening> {
  const running = await startCommand('bash', ['-c', line], env, ROOT, { detached: true, ready })
  t.teardown(async () => { await interruptGroup(running.child) })
  return running
}

const block = docSnippet('docs/getting-started.md', 'From a checkout', 'sh')
const lines = block.split('\n').filter(Boolean)
const command = (name: string): string => {
  const line = lines.find((l) => l.startsWith(`${name} `) || l === name)
  if (line === undefined) throw new Error(`docs/getting-started.md, "From a checkout": no ${name}`)
  return line
}

t.test('getting-started.md, "From a checkout": npm ci', async (t) => {
  // Not run: it would reinstall the node_modules this run uses. What it needs is checked: a lock
  // file in step with package.json (npm ci refuses one that is not); CI's .ci/run runs npm ci.
  t.equal(command('npm ci'), 'npm ci')
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as Record<string, Record<string, string>>
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, Record<string, Record<string, string>>> }
  t.same(lock.packages['']?.dependencies, manifest.dependencies, 'the lock file\'s dependencies are package.json\'s')
  t.same(lock.packages['']?.devDependencies, manifest.devDependencies, 'and its devDependencies')
  t.match(readFileSync(join(ROOT, '.ci/run'), 'utf8'), /^npm ci\b/m)
})

t.test('getting-started.md, "Which Node": npm ci on the scripts\' Node 24 warns of no engine, and asks about no install script', async (t) => {
  t.match(docSection('docs/getting-started.md', 'Which Node'), /warns `EBADENGINE`/, 'the page says why an older Node gets the warnings')
  // npm on the Node the scripts run on (node_modules/.bin first, as npm puts it for them)
  const env = { PATH: `${join(ROOT, 'node_modules', '.bin')}${delimiter}${process.env.PATH ?? ''}` }
  const versions = JSON.parse((await promisify(execFile)('npm', ['version', '--json'], { cwd: ROOT, env })).stdout) as { node: string }
  t.match(versions.node, /^24\./, 'npm runs on Node 24 here')
  // --dry-run: npm ci's checks of the lock file's tree (the engines among them), leaving node_modules as it is
  const { stderr } = await promisify(execFile)('npm', ['ci', '--dry-run', '--no-audit', '--no-fund'], { cwd: ROOT, env, maxBuffer: 16 << 20 })
  t.notMatch(stderr, /EBADENGINE/, 'every package\'s engines admit Node 24: the warnings of an older Node are harmless')
  t.notMatch(stderr, /install-scripts|allowScripts/, 'every install script is reviewed in package.json\'s allowScripts')
})

t.test('getting-started.md, "From a checkout": npx keygate, after npm ci alone', async (t) => {
  const line = command('npx keygate')
  t.equal(line.replace(/ +#.*$/, ''), 'npx keygate --help')
  // as in a newcomer's shell: npm on the machine's own node (no node_modules/.bin on the PATH), and
  // npm's cache a fresh one, where npx links the checkout as on a first run (the user's is left alone)
  const cache = mkdtempSync(join(tmpdir(), 'keygate-npm-cache-'))
  t.teardown(() => { rmSync(cache, { recursive: true, force: true }) })
  const path = (process.env.PATH ?? '').split(delimiter).filter((dir) => !dir.endsWith(join('node_modules', '.bin'))).join(delimiter)
  const { stdout } = await promisify(execFile)('bash', ['-c', line], { cwd: ROOT, env: { PATH: path, npm_config_cache: cache } })
  // the sources' usage names the checkout's npm form; the compiled CLI's would name keygate
  t.match(stdout, /^usage: npm run keygate -- serve\n/, 'the keygate command\'s usage, from the TypeScript sources: nothing built')
  t.match(stdout, /^ {7}npm run keygate -- routes check FILE\b/m)
})

t.test('getting-started.md, "From a checkout": the example service alone, then the gateway alone in front of it', { buffered: true }, async (t) => {
  const [upstreamPort, port] = [await freePort(), await freePort()]
  const upstream = await started(t, command('npm run start:upstream'), { UPSTREAM_PORT: String(upstreamPort) }, /Server listening at (http:\/\/127\.0\.0\.1:\d+)/)
  const upstreamUrl = upstream.match[1] as string
  t.equal(upstreamUrl, `http://127.0.0.1:${upstreamPort}`, 'the example service on UPSTREAM_PORT')
  const gateway = await started(t, command('npm run start:gateway'), { PORT: String(port), UPSTREAM_URL: upstreamUrl }, /keygate listens on (http:\/\/\S+) /)
  const url = gateway.match[1] as string
  t.equal(url, `http://127.0.0.1:${port}`)
  t.equal((await send(url, '/healthz')).status, 200, 'the gateway answers')
  const refused = await send(url, '/v1/clients/')
  t.equal(refused.status, 401, 'and guards the service')
  const direct = await send(upstreamUrl, '/v1/clients/')
  t.ok(direct.status < 500, `the service itself answers (${direct.status})`)
})

t.test('observability.md, "Metrics": npm start with a metrics port, then curl', { buffered: true }, async (t) => {
  const metrics = docSnippet('docs/observability.md', 'Metrics', 'sh')
  const [startLine, curlLine] = metrics.split('\n').filter(Boolean) as [string, string]
  // npm start is also "From a checkout"'s: the same command with one setting more
  t.equal(startLine.replace(/^KEYGATE_METRICS_PORT=9464 /, ''), command('npm start').replace(/ +#.*$/, ''))
  const [metricsPort, port] = [await freePort(), await freePort()]
  const start = startLine.replace('KEYGATE_METRICS_PORT=9464', `KEYGATE_METRICS_PORT=${metricsPort}`)
  t.not(start, startLine)
  const gateway = await started(t, start, { PORT: String(port), UPSTREAM_PORT: '0' }, /keygate listens on (http:\/\/\S+) \([^)]*\)/)
  t.match(gateway.match[0], `metrics on port ${metricsPort}`, 'the startup line names the metrics port')
  t.equal((await send(gateway.match[1] as string, '/v1/clients/')).status, 401, 'a request, to be counted')
  t.equal((await send(gateway.match[1] as string, '/metrics')).status, 404, 'the public port has no /metrics')
  const curl = curlLine.replace('127.0.0.1:9464', `127.0.0.1:${metricsPort}`)
  t.not(curl, curlLine)
  const { stdout } = await promisify(execFile)('bash', ['-c', curl], { env: { PATH: process.env.PATH ?? '' } })
  t.match(stdout, /^# HELP keygate_http_requests_total /m, 'Prometheus text')
  t.match(stdout, /^keygate_http_requests_total\{[^}]*status="401"[^}]*\} 1$/m, 'with the request counted')
  t.match(stdout, /^process_cpu_user_seconds_total /m, 'and the process metrics')
})
