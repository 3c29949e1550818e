// keygate on a Redis master found through Sentinel (a master, its replica and a sentinel, started
// by this test): gateways on it act as one, pub/sub works, and a failover costs a gateway a few
// 503s at most, after which it writes to the new master without a restart.
import t from 'tap'
import { loadConfig } from '../../gateway/src/config/env.js'
import { createStore } from '../../gateway/src/store/index.js'
import { createRedisClient } from '../../gateway/src/store/redis-connection.js'
import { keygateCli } from '../helpers/cli.js'
import { blockSettings, docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { deletePrefix, freePort, uniquePrefix } from '../helpers/redis.js'
import { failOver, startRedisSentinel } from '../helpers/redis-topology.js'
import { login, registerKey, sendSigned, startTestGateway, startUpstreamStub } from '../helpers/stack.js'

t.test('through Redis Sentinel', async (t) => {
  const setup = await startRedisSentinel(t)
  const redisPrefix = uniquePrefix('redis-sentinel')
  t.teardown(async () => { await deletePrefix(setup.connection, redisPrefix) })
  const upstreamUrl = await startUpstreamStub(t)

  t.test('configured by environment as docs/scaling.md says: the CLI adds a user the gateway logs in', async (t) => {
    // the Sentinel half of the block under "Redis Sentinel and Redis Cluster", its example
    // addresses, master name and passwords made this test's
    const block = docSnippet('docs/scaling.md', 'Redis Sentinel and Redis Cluster', 'sh')
    const half = block.split(/\n\n(?=# Cluster)/)[0] as string
    const filled = half
      .replace(/^KEYGATE_REDIS_SENTINELS=10\.0\.0\.5:26379,10\.0\.0\.6:26379,10\.0\.0\.7:26379$/m, `KEYGATE_REDIS_SENTINELS=${setup.env.KEYGATE_REDIS_SENTINELS}`)
      .replace(/^KEYGATE_REDIS_SENTINEL_MASTER=mymaster$/m, `KEYGATE_REDIS_SENTINEL_MASTER=${setup.masterName}`)
      .replace(/^KEYGATE_REDIS_PASSWORD=\.\.\. /m, `KEYGATE_REDIS_PASSWORD=${setup.env.KEYGATE_REDIS_PASSWORD} `)
      .replace(/^KEYGATE_REDIS_SENTINEL_PASSWORD=\.\.\. /m, `KEYGATE_REDIS_SENTINEL_PASSWORD=${setup.env.KEYGATE_REDIS_SENTINEL_PASSWORD} `)
    t.notMatch(filled, /10\.0\.|mymaster|=\.\.\./, 'every example value filled in')
    const settings = blockSettings(filled)
    t.same(settings, setup.env, 'the page names the variables this Sentinel needs, no more, no fewer')
    const env = { ...settings, KEYGATE_REDIS_PREFIX: redisPrefix }
    t.same(loadConfig(env).redisTopology, setup.connection, 'the variables make the sentinel configuration')
    const added = await keygateCli(['users', 'add', 'alice'], 'alice-password-1', env)
    t.equal(added.code, 0, added.stderr)
    t.match(added.stdout, `user alice created in master "${setup.masterName}" of sentinels ${setup.env.KEYGATE_REDIS_SENTINELS}`)
    for (const secret of [setup.connection.password, setup.connection.sentinelPassword] as string[]) {
      t.notMatch(added.stdout + added.stderr, secret, 'no password is printed')
    }
  })

  t.test('gateways on the master act as one, and keep working across a failover', async (t) => {
    // Registrations that land on the old master before a gateway hears of the failover succeed (and
    // are lost with it): on a busy machine, enough of them to reach the key limits, which are not
    // what this test is about.
    const config = { maxKeysPerUser: 1000, keyRegistrationsPerHour: 10_000, keyRegistrationsPerDay: 10_000 }
    const a = await startTestGateway(t, { store: 'redis', redis: setup.connection, redisPrefix, upstreamUrl, config })
    const b = await startTestGateway(t, { store: 'redis', redis: setup.connection, redisPrefix, upstreamUrl, config })
    const token = await login(b.url, 'alice', 'alice-password-1')
    const keys = rsaKeyPair()
    t.equal((await registerKey(a.url, token, keys)).status, 201, 'a key registers at A with a token from B')
    t.equal((await registerKey(b.url, token, keys, 'again')).json().code, 'DUPLICATE_KEY', 'and is a duplicate at B')

    const body = JSON.stringify({ name: 'Ada', email: 'ada@example.com', tax_id: '12345' })
    const headers = { ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }), 'content-type': 'application/json' }
    t.equal((await send(b.url, '/v1/clients/', { method: 'POST', headers, body })).status, 201, 'a signed POST goes through B')
    const replayed = await send(a.url, '/v1/clients/', { method: 'POST', headers, body })
    t.equal(replayed.json().code, 'REPLAYED_REQUEST', 'the same signed POST at A is a replay')

    // The replica becomes the master; each gateway must find it through the sentinel. Until it
    // has, it answers 503 STORE_UNAVAILABLE (or, in the moment before it hears of the failover,
    // writes to the old master: Redis replicates asynchronously, Sentinel cannot prevent that).
    await failOver(setup)
    const newMaster = setup.node(setup.replicaPort)
    t.match(await newMaster.info('replication'), /role:master/, 'the replica is the master now')
    t.equal(await newMaster.exists(`${redisPrefix}user:alice`), 1, 'and holds what was written before the failover')
    for (const [name, gateway] of [['A', a], ['B', b]] as const) {
      const refusals = new Set<string>()
      let onNewMaster = false
      for (let attempt = 0; attempt < 100 && !onNewMaster; attempt++) {
        const fresh = rsaKeyPair()
        const res = await registerKey(gateway.url, token, fresh, `after failover ${attempt}`)
        if (res.status === 201) {
          onNewMaster = await newMaster.exists(`${redisPrefix}key:${fresh.apiKey}`) === 1
        } else {
          refusals.add(`${res.status} ${res.json().code}`)
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
      }
      t.ok(onNewMaster, `gateway ${name} registers keys on the new master without a restart`)
      t.same([...refusals].filter((r) => r !== '503 STORE_UNAVAILABLE'), [], 'and answered nothing but 503 STORE_UNAVAILABLE meanwhile')
    }
    const after = await sendSigned(a.url, {
      keys,
      token,
      method: 'POST',
      target: '/v1/clients/',
      body: JSON.stringify({ name: 'Bo', email: 'bo@example.com', tax_id: '54321' })
    })
    t.equal(after.status, 201, 'and signed writes go through (their replay marks on the new master)')
  })

  t.test('pub/sub through the master the sentinel names', async (t) => {
    const subscriber = createRedisClient(setup.connection, { commandTimeoutMs: 2000 })
    const publisher = createRedisClient(setup.connection, { commandTimeoutMs: 2000 })
    t.teardown(() => { subscriber.disconnect(); publisher.disconnect() })
    await Promise.all([subscriber.connect(), publisher.connect()])
    const channel = uniquePrefix('redis-sentinel-channel')
    await subscriber.subscribe(channel)
    const heard = new Promise((resolve) => subscriber.on('message', (from: string, message: string) => { if (from === channel) resolve(message) }))
    await publisher.publish(channel, 'hello')
    t.equal(await heard, 'hello')
  })
})

t.test('sentinels that do not answer stop the start, naming them without a password', async (t) => {
  const port = await freePort()
  const redisTopology = {
    mode: 'sentinel' as const,
    sentinels: [{ host: '127.0.0.1', port }],
    masterName: 'm',
    username: undefined,
    password: 'Pa55-not-shown',
    sentinelPassword: 'S3ntinel-not-shown'
  }
  const refused = createStore({ redisUrl: undefined, redisTopology, redisPrefix: 'x:', redisCommandTimeoutMs: 500 })
  await t.rejects(refused, { message: new RegExp(`^cannot reach Redis at master "m" of sentinels 127\\.0\\.0\\.1:${port}: `) })
  await refused.catch((err: Error) => { t.notMatch(err.message, /Pa55|S3ntinel/) })
})
