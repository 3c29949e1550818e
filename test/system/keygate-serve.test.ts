// `keygate serve` and `keygate demo`: the gateway run by the command itself, so the process a
// supervisor signals is the gateway (no npm in between to orphan it): SIGHUP reloads its routes,
// SIGTERM stops it with exit code 0 and frees its port.
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { send } from '../helpers/http.js'
import { compiled } from '../helpers/build.js'
import { exitOn, portAnswers, startCommand, type Listening } from '../helpers/listening.js'
import { startRecorder } from '../helpers/recorder.js'
import { routeFile } from '../helpers/routes.js'
import { login } from '../helpers/stack.js'

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
