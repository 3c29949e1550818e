// `keygate serve` and `keygate demo`: the gateway run by the command itself, so the process a
// supervisor signals is the gateway (no npm in between to orphan it): SIGHUP reloads its routes,
// SIGTERM stops it with exit code 0 and frees its port. With KEYGATE_PID_FILE, `keygate reload`
// and `keygate stop` signal it however it was started (docs/getting-started.md's "Signals": npm
// run start:gateway; a cluster's primary). And the checkout's bin/keygate.js (what `npx keygate` runs there): the sources in a
// child, with the signals passed on.
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { keygateCli } from '../helpers/cli.js'
import { docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { compiled } from '../helpers/build.js'
import { exitOn, portAnswers, startCommand, type Listening } from '../helpers/listening.js'
import { gone, redisEnv, startCluster } from '../helpers/process-tree.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { login } from '../helpers/stack.js'
import { TEST_ENV } from '../helpers/test-env.js'

// Every test starts processes (npm and tsx among them: seconds each on a loaded 2-core machine):
// the file may take longer than the suite's default per-file timeout.
t.setTimeout(300_000)

const root = fileURLToPath(new URL('../..', import.meta.url))
/** the keygate command as installed: compiled */
const KEYGATE = await compiled('gateway/src/cli/keygate.ts')

const keygate = async (verb: string, env: Record<string, string>): Promise<Listening> =>
  await startCommand(process.execPath, [KEYGATE, verb], env, root)

t.test('keygate serve: the gateway of the environment, reloaded on SIGHUP, stopped on SIGTERM', async (t) => {
  const recorder = await startRecorder(t)
  const file = routeFile(t, `routes:\n  - { prefix: /open/, upstream: ${recorder.url}, auth: public, methods: [GET] }\n`)
  const gw = await keygate('serve', { KEYGATE_ROUTES: file.path })
  t.teardown(() => { gw.child.kill('SIGKILL') })
  t.equal((await send(gw.url, '/healthz')).status, 200)
  t.equal((await send(gw.url, '/open/a')).status, 200, 'the route file\'s route is served')
  t.equal(recorder.requests.at(-1)?.url, '/open/a')
  t.equal((await send(gw.url, '/later/a')).status, 404)

  file.write(`routes:\n  - { prefix: /later/, upstream: ${recorder.url}, auth: public, methods: [GET] }\n`)
  const reloaded = new Promise<void>((resolve) => {
    gw.child.stdout.on('data', () => { if (gw.stdout().includes('routes reloaded')) resolve() })
  })
  gw.child.kill('SIGHUP')
  await reloaded
  t.equal((await send(gw.url, '/later/a')).status, 200, 'SIGHUP to the command\'s own process reloads the routes')

  t.equal(await exitOn(gw.child, 'SIGTERM'), 0, 'SIGTERM: exit code 0')
  t.equal(await portAnswers(gw.url), false, 'and the port is free: nothing was left behind')
})

t.test('keygate demo: the example service behind the gateway, with a demo user', async (t) => {
  const demo = await keygate('demo', { UPSTREAM_PORT: '0' })
  t.teardown(() => { demo.child.kill('SIGKILL') })
  const password = /password: (\S+)/.exec(demo.stderr())?.[1]
  t.ok(password !== undefined && password.length >= 16, 'a random demo password is printed')
  t.type(await login(demo.url, 'demo', password), 'string', 'and it logs in')
  t.equal(await exitOn(demo.child, 'SIGTERM'), 0)
  t.equal(await portAnswers(demo.url), false)
})

t.test('serve and demo take no arguments', async (t) => {
  const child = spawn(process.execPath, [KEYGATE, 'serve', '--port', '1'], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '' }
  })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  t.equal(code, 2)
  t.equal(stderr, 'keygate serve takes no arguments: it is configured by its environment (see docs/configuration.md)\n')
})

/** the pid field of the JSON log line whose message starts with `message` */
function pidOfLine (stdout: string, message: string): number | undefined {
  for (const text of stdout.split('\n')) {
    try {
      const line = JSON.parse(text) as { pid?: number; msg?: string }
      if (line.msg?.startsWith(message) === true) return line.pid
    } catch { /* npm's own lines */ }
  }
  return undefined
}

/** resolves once `running` has logged `message` */
async function logged (running: Listening, message: string): Promise<void> {
  await new Promise<void>((resolve) => {
    const check = (): void => { if (running.stdout().includes(message)) resolve() }
    running.child.stdout.on('data', check)
    check()
  })
}

const emptyFolder = (t: Test): string => {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-pid-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  return dir
}

t.test('getting-started.md, "Signals": under npm run start:gateway, keygate reload and keygate stop reach the gateway, not npm', async (t) => {
  const [start, reload, stop] = docSnippet('docs/getting-started.md', 'Signals', 'sh').split('\n').filter(Boolean).map((line) => line.replace(/ +#.*$/, ''))
  const recorder = await startRecorder(t)
  const file = routeFile(t, `routes:\n  - { prefix: /open/, upstream: ${recorder.url}, auth: public, methods: [GET] }\n`)
  // the page's file, in this test's folder; the page's npm run keygate --, the compiled command (the same CLI, faster to start)
  const pidFile = join(dirname(file.path), 'keygate.pid')
  const filled = (line = ''): string => line.replaceAll('/tmp/keygate.pid', pidFile).replace(/^(\S+) npm run keygate -- /, `$1 ${process.execPath} ${KEYGATE} `)
  const run = async (line: string): Promise<{ code: number; stdout: string; stderr: string }> =>
    await promisify(execFile)('bash', ['-c', line], { cwd: root, env: { PATH: process.env.PATH ?? '', ...TEST_ENV } })
      .then(({ stdout, stderr }) => ({ code: 0, stdout, stderr }), (err: { code: number; stdout: string; stderr: string }) => err)
  t.match(start, /^KEYGATE_PID_FILE=\/tmp\/keygate\.pid npm run start:gateway &$/, 'in the background, as a shell\'s $! would be npm\'s')
  // the & is the test's: it runs the line as a child of its own (KEYGATE_PID_FILE from the line)
  const gw = await startCommand('bash', ['-c', filled(start).replace(/ &$/, '')], { KEYGATE_ROUTES: file.path }, root, { detached: true })
  t.teardown(() => { try { process.kill(-(gw.child.pid as number), 'SIGKILL') } catch {} })
  const exited = new Promise<number | null>((resolve) => gw.child.on('exit', resolve))
  // written before the startup line: there as soon as the line is
  const pid = Number(readFileSync(pidFile, 'utf8'))
  t.equal(pid, pidOfLine(gw.stdout(), 'keygate listens on'), 'the file holds the PID of the process that logged the startup line')
  t.not(pid, gw.child.pid, 'not npm\'s')
  t.equal((await send(gw.url, '/open/a')).status, 200)

  file.write(`routes:\n  - { prefix: /later/, upstream: ${recorder.url}, auth: public, methods: [GET] }\n`)
  t.not(filled(reload), reload, 'the file and the command filled in')
  const reloaded = await run(filled(reload))
  t.equal(reloaded.code, 0, reloaded.stderr)
  t.match(reloaded.stdout, new RegExp(`^SIGHUP sent to keygate \\(pid ${pid}\\): it re-reads its route file`))
  await logged(gw, 'routes reloaded')
  t.equal((await send(gw.url, '/later/a')).status, 200, 'keygate reload: the new routes are served')
  t.equal((await send(gw.url, '/open/a')).status, 404, 'and the old ones are gone')

  const stopped = await run(filled(stop))
  t.equal(stopped.code, 0, stopped.stderr)
  t.equal(stopped.stdout, `SIGTERM sent to keygate (pid ${pid}): it has exited\n`, 'keygate stop returns once the gateway has exited')
  t.match(gw.stdout(), /SIGTERM: shutting down/, 'the gateway shut down as on any SIGTERM')
  t.equal(await exited, 0, 'exit code 0, passed on by npm')
  t.equal(await portAnswers(gw.url), false, 'the port is free')
  t.notOk(existsSync(pidFile), 'and the PID file removed')
})

t.test('KEYGATE_PID_FILE with KEYGATE_WORKERS=2: the primary\'s PID; keygate stop ends every worker', async (t) => {
  const pidFile = join(emptyFolder(t), 'keygate.pid')
  const gw = await startCluster(t, { ...await redisEnv(t, 'pid-file'), KEYGATE_PID_FILE: pidFile })
  t.equal(Number(readFileSync(pidFile, 'utf8')), gw.child.pid, 'the primary\'s, the process that takes the signals')
  t.notOk(gw.workers.includes(gw.child.pid as number))
  const stop = await keygateCli(['stop'], '', { KEYGATE_PID_FILE: pidFile })
  t.equal(stop.code, 0, stop.stderr)
  t.same(await gw.exited, { code: 0, signal: null }, 'the primary exits 0')
  t.ok(await gone(gw.workers), 'and every worker is gone')
  t.notOk(existsSync(pidFile))
})

t.test('keygate reload and stop say why when there is nothing to signal; a PID file nowhere stops the start', async (t) => {
  const unset = await keygateCli(['reload'], '', {})
  t.equal(unset.code, 2)
  t.match(unset.stderr, /^KEYGATE_PID_FILE is not set: keygate reload signals the gateway whose PID is in that file/)
  const extra = await keygateCli(['stop', 'now'], '', {})
  t.equal(extra.code, 2)
  t.equal(extra.stderr, 'keygate stop takes no arguments: it finds the gateway by KEYGATE_PID_FILE\n')

  const dir = emptyFolder(t)
  const pidFile = join(dir, 'keygate.pid')
  const missing = await keygateCli(['stop'], '', { KEYGATE_PID_FILE: pidFile })
  t.equal(missing.code, 1)
  t.equal(missing.stderr, `keygate: no PID in ${pidFile}: is a gateway running with KEYGATE_PID_FILE=${pidFile}? (it writes the file once it serves)\n`)
  // a file left by a gateway killed outright, naming a PID no process has (pid_max is above them all)
  const noSuchPid = Number(readFileSync('/proc/sys/kernel/pid_max', 'utf8'))
  writeFileSync(pidFile, `${noSuchPid}\n`)
  const stale = await keygateCli(['reload'], '', { KEYGATE_PID_FILE: pidFile })
  t.equal(stale.code, 1)
  t.equal(stale.stderr, `keygate: process ${noSuchPid} of ${pidFile} is not running: the file outlived a gateway that was killed outright\n`)

  const nowhere = join(dir, 'no-such-folder', 'keygate.pid')
  const child = spawn(process.execPath, [KEYGATE, 'serve'], { cwd: root, env: { PATH: process.env.PATH ?? '', PORT: '0', KEYGATE_PID_FILE: nowhere } })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
  t.equal(await new Promise<number | null>((resolve) => child.on('close', resolve)), 1)
  t.match(output, `configuration error: KEYGATE_PID_FILE: cannot write ${nowhere} (ENOENT)`, 'the start is refused, naming the file')
  t.notMatch(output, /listens on/, 'before anything listens')
})

t.test('bin/keygate.js in a checkout: the sources in a child, with SIGHUP and SIGTERM passed on', async (t) => {
  const launcher = join(root, 'bin', 'keygate.js')
  const recorder = await startRecorder(t)
  const file = routeFile(t, `routes:\n  - { prefix: /open/, upstream: ${recorder.url}, auth: public, methods: [GET] }\n`)
  const gw = await startCommand(process.execPath, [launcher, 'serve'], { KEYGATE_ROUTES: file.path }, root)
  t.teardown(() => { gw.child.kill('SIGKILL') })
  const pid = pidOfLine(gw.stdout(), 'keygate listens on') as number
  t.not(pid, gw.child.pid, 'the gateway is a child of the launcher')
  const args = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')
  t.same(args.slice(1, 6), ['--conditions=keygate-source', '--import', import.meta.resolve('tsx'), join(root, 'gateway/src/cli/keygate.ts'), 'serve'],
    'running the TypeScript sources through tsx, as npm run keygate does')
  t.equal((await send(gw.url, '/open/a')).status, 200)

  file.write(`routes:\n  - { prefix: /later/, upstream: ${recorder.url}, auth: public, methods: [GET] }\n`)
  gw.child.kill('SIGHUP')
  await logged(gw, 'routes reloaded')
  t.equal((await send(gw.url, '/later/a')).status, 200, 'SIGHUP to the launcher reloads the gateway\'s routes')
  t.equal(await exitOn(gw.child, 'SIGTERM'), 0, 'SIGTERM to the launcher: the gateway shuts down, and the launcher exits with its code')
  t.match(gw.stdout(), /SIGTERM: shutting down/)
  t.equal(await portAnswers(gw.url), false, 'the port is free')
  t.ok(await gone([pid]), 'and the gateway is gone')

  const typo = spawn(process.execPath, [launcher, 'serv'], { cwd: root, env: { PATH: process.env.PATH ?? '' } })
  let stderr = ''
  typo.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  t.equal(await new Promise<number | null>((resolve) => typo.on('close', resolve)), 2, 'a usage error: the child\'s exit code 2')
  t.equal(stderr, 'keygate: unknown command "serv"; did you mean "serve"? (keygate --help lists them)\n')
})
