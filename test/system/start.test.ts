// `npm start` as a newcomer meets it: both services come up, a store without users gets a demo
// user whose password is printed once, the walkthrough's first step works with it, and SIGTERM
// stops everything cleanly.
import { readFileSync } from 'node:fs'
import t from 'tap'
import { DEFAULT_PORT, DEFAULT_UPSTREAM_PORT } from '../../gateway/src/config/env.js'
import { docBlocks } from '../helpers/docs.js'
import { TYPESCRIPT_NODE_ARGS } from '../helpers/typescript-node.js'
import { exitOn, startListening, type Listening } from '../helpers/listening.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { login } from '../helpers/stack.js'

const start = async (env: Record<string, string>): Promise<Listening> => await startListening('scripts/start.ts', [], { UPSTREAM_PORT: '0', ...env })
const stop = async (child: Listening['child']): Promise<number | null> => await exitOn(child, 'SIGTERM')

t.test('the README\'s two commands: npm start runs what these tests run, on :8080 and :8081; npm test is what CI runs', async (t) => {
  // the first block under the title (the page's whole text is that heading's section)
  const block = docBlocks('README.md', 'keygate', 'sh')[0] ?? ''
  const commands = block.split('\n').map((line) => line.replace(/#.*$/, '').trim()).filter((line) => line !== '')
  t.same(commands, ['npm ci && npm start', 'npm ci && npm test'])
  const scripts = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> }).scripts
  t.equal(scripts.start, ['node', ...TYPESCRIPT_NODE_ARGS, 'scripts/start.ts'].join(' '), 'npm start is node with the flags and script start() runs here')
  t.match(block, /:8080 in front of the example clients service on :8081/)
  t.same([DEFAULT_PORT, DEFAULT_UPSTREAM_PORT], [8080, 8081], 'the ports the comment names are the defaults')
  const ci = readFileSync(new URL('../../.ci/run', import.meta.url), 'utf8')
  t.match(ci, /^npm ci /m, '.ci/run installs with npm ci')
  t.match(ci, /^npm test 2>&1/m, 'and runs npm test (this suite)')
})

t.test('npm start on the embedded store', async (t) => {
  const { child, url, stderr } = await start({})
  t.teardown(() => { child.kill('SIGKILL') })
  const password = /password: (\S+)/.exec(stderr())?.[1]
  t.match(password, /^[0-9a-f]{32}$/, 'a random demo password is printed: 128 bits in hex, never a leading "-" a CLI would take for an option')
  t.type(await login(url, 'demo', password), 'string', 'and it logs in')
  t.match(stderr(), /username: demo/)
  t.equal(await stop(child), 0, 'SIGTERM stops both services with exit code 0')
})

t.test('the demo user is made only for a store without users, and shown once', async (t) => {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('start')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const env = { REDIS_URL: redisUrl, KEYGATE_REDIS_PREFIX: prefix }
  const first = await start(env)
  const password = /password: (\S+)/.exec(first.stderr())?.[1]
  t.ok(password)
  t.equal(await stop(first.child), 0)

  const second = await start(env)
  t.teardown(() => { second.child.kill('SIGKILL') })
  t.notMatch(second.stderr(), /password:/, 'the second start prints no password')
  t.type(await login(second.url, 'demo', password), 'string', 'the first password still works')
  t.equal(await stop(second.child), 0)

  const otherPrefix = uniquePrefix('start')
  t.teardown(async () => { await deletePrefix(redisUrl, otherPrefix) })
  const withUsers = await start({ KEYGATE_BOOTSTRAP_USERS: 'ops:ops-password-1', KEYGATE_REDIS_PREFIX: otherPrefix, REDIS_URL: redisUrl })
  t.teardown(() => { withUsers.child.kill('SIGKILL') })
  t.notMatch(withUsers.stderr(), /password:/, 'bootstrapped users: no demo user')
  t.type(await login(withUsers.url, 'ops', 'ops-password-1'), 'string')
  t.equal(await stop(withUsers.child), 0)
})
