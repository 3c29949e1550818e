// keygate on a Redis Cluster of three masters started by this test: gateways on it act as one,
// every multi-key script and MULTI stays in one hash slot, per-request keys spread over the
// shards, and pub/sub and key scans reach every node.
import { once } from 'node:events'
import t from 'tap'
import { loadConfig } from '../../gateway/src/config/env.js'
import { createStore } from '../../gateway/src/store/index.js'
import { createRedisClient, masters, scanKeys } from '../../gateway/src/store/redis-connection.js'
import { keygateCli } from '../helpers/cli.js'
import { blockSettings, docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair, signedHeaders } from '../helpers/keys.js'
import { deletePrefix, freePort, uniquePrefix } from '../helpers/redis.js'
import { startRedisCluster } from '../helpers/redis-topology.js'
import { addUser, login, registerKey, sendSigned, startTestGateway, startUpstreamStub } from '../helpers/stack.js'

t.test('on a Redis Cluster', async (t) => {
  const cluster = await startRedisCluster(t)

  /** every key under `prefix`, on every master, with the port of the master that holds it */
  const keysUnder = async (prefix: string): Promise<Array<{ key: string, port: number }>> => {
    const client = createRedisClient(cluster.connection, { commandTimeoutMs: 2000 })
    await client.connect()
    try {
      const found: Array<{ key: string, port: number }> = []
      for (const node of masters(client)) {
        for await (const keys of scanKeys(node, `${prefix}*`)) found.push(...keys.map((key) => ({ key, port: node.options.port as number })))
      }
      return found
    } finally {
      client.disconnect()
    }
  }

  t.test('gateways on the cluster act as one', async (t) => {
    const redisPrefix = uniquePrefix('redis-cluster')
    t.teardown(async () => { await deletePrefix(cluster.connection, redisPrefix) })
    const upstreamUrl = await startUpstreamStub(t)
    const a = await startTestGateway(t, { store: 'redis', redis: cluster.connection, redisPrefix, upstreamUrl })
    const b = await startTestGateway(t, { store: 'redis', redis: cluster.connection, redisPrefix, upstreamUrl })
    t.same(a.app.keygate.tokens.jwks, b.app.keygate.tokens.jwks, 'both publish the one shared signing key')

    await addUser(a, 'alice')
    const token = await login(b.url, 'alice')
    const keys = rsaKeyPair()
    t.equal((await registerKey(a.url, token, keys)).status, 201, 'a key registers at A with a token from B')
    const duplicate = await registerKey(b.url, token, keys, 'again')
    t.equal(duplicate.status, 409, 'and is a duplicate at B')
    t.equal(duplicate.json().code, 'DUPLICATE_KEY')

    const body = JSON.stringify({ name: 'Ada', email: 'ada@example.com', tax_id: '12345' })
    const headers = { ...signedHeaders({ keys, token, method: 'POST', target: '/v1/clients/', body }), 'content-type': 'application/json' }
    const created = await send(b.url, '/v1/clients/', { method: 'POST', headers, body })
    t.equal(created.status, 201, 'a signed POST goes through B')
    const replayed = await send(a.url, '/v1/clients/', { method: 'POST', headers, body })
    t.equal(replayed.status, 401, 'the same signed POST at A is a replay')
    t.equal(replayed.json().code, 'REPLAYED_REQUEST')
    const listed = await sendSigned(a.url, { keys, token, method: 'GET', target: '/v1/clients/' })
    t.equal(listed.status, 200, 'a signed GET goes through A')
    t.same(listed.json<{ items: Array<{ id: string }> }>().items.map((c) => c.id), [created.json().id])
  })

  t.test('the registry shares one hash slot; per-request keys spread over the masters', async (t) => {
    const prefix = uniquePrefix('redis-cluster')
    const store = await createStore({ redisUrl: undefined, redisTopology: cluster.connection, redisPrefix: prefix, redisCommandTimeoutMs: 2000 })
    t.teardown(async () => { await store.close() })
    await store.putUser('alice', 'hash')
    t.equal(await store.createKey({ apiKey: 'c'.repeat(64), owner: 'alice', name: 'k', publicKey: 'PEM', createdAt: '2026-01-01T00:00:00.000Z' }), 'created')
    await store.getOrCreateSigningKey('key-1')
    await store.rotateSigningKey('key-2', 60_000)
    for (let i = 0; i < 60; i++) await store.rememberOnce(`replay:${i}`, 60_000)
    await store.hit('login:user:x', 60_000)

    const found = await keysUnder(prefix)
    const tag = `${prefix}{${prefix.replace(/:$/, '')}}`
    const registry = found.filter(({ key }) => key.startsWith(tag))
    t.same(registry.map(({ key }) => key.slice(tag.length)).sort(),
      ['jwt:previous-signing-keys', 'jwt:signing-key', `key:${'c'.repeat(64)}`, 'user-keys:alice', 'user:alice', 'users'],
      'users, keys, owner indexes and signing keys carry the prefix as their hash tag')
    const node = cluster.node(cluster.ports[0] as number)
    const slots = new Set(await Promise.all(registry.map(async ({ key }) => await node.call('CLUSTER', 'KEYSLOT', key))))
    t.equal(slots.size, 1, 'and so share one slot, where scripts and MULTI over them are allowed')
    const perRequest = found.filter(({ key }) => !key.startsWith(tag))
    t.equal(perRequest.length, 61, 'replay marks and counters carry no tag')
    t.equal(new Set(perRequest.map(({ port }) => port)).size, 3, 'and spread over all three masters')

    await deletePrefix(cluster.connection, prefix)
    t.same(await keysUnder(prefix), [], 'deleting a prefix scans and empties every master')
  })

  t.test('pub/sub: a subscriber hears what is published on any master', async (t) => {
    const subscriber = createRedisClient(cluster.connection, { commandTimeoutMs: 2000 })
    t.teardown(() => { subscriber.disconnect() })
    await subscriber.connect()
    const channel = uniquePrefix('redis-cluster-channel')
    await subscriber.subscribe(channel)
    const heard: string[] = []
    subscriber.on('message', (from: string, message: string) => { if (from === channel) heard.push(message) })
    for (const port of cluster.ports) {
      const arrived = once(subscriber, 'message')
      await cluster.node(port).publish(channel, `from ${port}`)
      await arrived
    }
    t.same(heard, cluster.ports.map((port) => `from ${port}`))
  })

  t.test('configured by environment as docs/scaling.md says: the CLI adds a user the gateway logs in', async (t) => {
    const redisPrefix = uniquePrefix('redis-cluster')
    t.teardown(async () => { await deletePrefix(cluster.connection, redisPrefix) })
    // the Cluster half of the block under "Redis Sentinel and Redis Cluster", its example
    // addresses and password made this test's (the user is the page's: keygate)
    const block = docSnippet('docs/scaling.md', 'Redis Sentinel and Redis Cluster', 'sh')
    const half = block.split(/\n\n(?=# Cluster)/)[1] ?? ''
    const filled = half
      .replace(/^KEYGATE_REDIS_CLUSTER_NODES=10\.0\.1\.5:6379,10\.0\.1\.6:6379,10\.0\.1\.7:6379$/m, `KEYGATE_REDIS_CLUSTER_NODES=${cluster.env.KEYGATE_REDIS_CLUSTER_NODES}`)
      .replace(/^KEYGATE_REDIS_PASSWORD=\.\.\.$/m, `KEYGATE_REDIS_PASSWORD=${cluster.env.KEYGATE_REDIS_PASSWORD}`)
    t.notMatch(filled, /10\.0\.|=\.\.\./, 'every example value filled in')
    const settings = blockSettings(filled)
    t.same(settings, cluster.env, 'the page names the variables this cluster needs, no more, no fewer')
    const env = { ...settings, KEYGATE_REDIS_PREFIX: redisPrefix }
    const config = loadConfig(env)
    t.same(config.redisTopology, cluster.connection, 'the variables make the cluster configuration')
    const added = await keygateCli(['users', 'add', 'carol'], 'carol-password-1', env)
    t.equal(added.code, 0, added.stderr)
    t.match(added.stdout, `user carol created in Redis Cluster ${cluster.env.KEYGATE_REDIS_CLUSTER_NODES}`)
    t.notMatch(added.stdout + added.stderr, cluster.connection.password as string, 'the password is not printed')
    const gw = await startTestGateway(t, { store: 'redis', redis: config.redisTopology, redisPrefix, upstreamUrl: await startUpstreamStub(t) })
    t.ok(await login(gw.url, 'carol', 'carol-password-1'), 'carol logs in at a gateway on the cluster')
  })
})

t.test('a cluster that does not answer stops the start, naming it without the password', async (t) => {
  const port = await freePort()
  const redisTopology = { mode: 'cluster' as const, nodes: [{ host: '127.0.0.1', port }], username: 'keygate', password: 'Pa55-not-shown' }
  const refused = createStore({ redisUrl: undefined, redisTopology, redisPrefix: 'x:', redisCommandTimeoutMs: 500 })
  await t.rejects(refused, { message: new RegExp(`^cannot reach Redis at Redis Cluster 127\\.0\\.0\\.1:${port}: `) })
  await refused.catch((err: Error) => { t.notMatch(err.message, 'Pa55-not-shown') })
})
