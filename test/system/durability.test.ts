// A 201 for a key registration means the key survives a Redis crash, with the persistence
// docker-compose.yml configures (append-only file, fsync on every write). A real redis-server,
// killed with SIGKILL and started again on the same data.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { rsaKeyPair } from '../helpers/keys.js'
import { startRecorder } from '../helpers/recorder.js'
import { freePort } from '../helpers/redis.js'
import { addUser, login, registerKey, sendSigned, startTestGateway } from '../helpers/stack.js'

async function startRedis (port: number, dir: string): Promise<ChildProcess> {
  const child = spawn(
    'redis-server',
    ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--appendonly', 'yes', '--appendfsync', 'always', '--save', ''],
    { stdio: 'ignore' }
  )
  for (let i = 0; i < 100; i++) {
    if (spawnSync('redis-cli', ['-p', String(port), 'ping']).stdout?.toString().trim() === 'PONG') return child
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error('redis-server did not start')
}

t.test('registered keys survive a Redis crash (SIGKILL) and restart', async (t) => {
  if (spawnSync('redis-server', ['--version']).status !== 0) throw new Error('this test needs redis-server (apt-get install redis-server)')
  const dir = mkdtempSync(join(tmpdir(), 'keygate-aof-'))
  const port = await freePort()
  let redis = await startRedis(port, dir)
  t.teardown(() => { redis.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }) })
  const recorder = await startRecorder(t)
  const config = { redisUrl: `redis://127.0.0.1:${port}` }

  const first = await startTestGateway(t, { store: 'redis', redisPrefix: 'durable:', upstreamUrl: recorder.url, config })
  await addUser(first, 'alice')
  const token = await login(first.url, 'alice')
  const keys = Array.from({ length: 20 }, () => rsaKeyPair())
  for (const [i, key] of keys.entries()) t.equal((await registerKey(first.url, token, key, `key ${i}`)).status, 201)

  redis.kill('SIGKILL')
  await new Promise((resolve) => redis.once('exit', resolve))
  redis = await startRedis(port, dir)

  // A gateway that never saw these keys (nothing cached) must find all of them in Redis.
  const second = await startTestGateway(t, { store: 'redis', redisPrefix: 'durable:', upstreamUrl: recorder.url, config })
  let served = 0
  for (const key of keys) {
    if ((await sendSigned(second.url, { keys: key, token, method: 'GET', target: '/v1/clients/' })).status === 200) served++
  }
  t.equal(served, 20, '20 keys registered before the crash: 20 serve after it')
  t.equal((await registerKey(second.url, token, keys[0]!, 'again')).status, 409, 'and are still duplicates')
})
