// `npm run keygate -- tokens rotate` as an operator runs it: a child process on the running
// gateways' Redis. The running gateway picks the new key up without a restart.
import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { keygateCli } from '../../../helpers/cli.js'
import { send } from '../../../helpers/http.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { routeFile } from '../../../helpers/routes.js'
import { startStack } from '../../../helpers/stack.js'

const keygate = async (args: string[], env: Record<string, string>) => await keygateCli(args, '', env)

const ROTATED = /^token signing key rotated in redis:\/\/\S+ \(prefix (\S+)\): new kid ([\w-]{43})\n/

t.test('tokens rotate', async (t) => {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('cli-rotate')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const env = { REDIS_URL: redisUrl, KEYGATE_REDIS_PREFIX: prefix, KEYGATE_TOKEN_TTL_SECONDS: '60' }

  const gw = await startStack(t, { store: 'redis', redisPrefix: prefix })
  t.teardown(() => { gw.app.keygate.tokens.close() })
  const tokens = gw.app.keygate.tokens
  const oldKid = tokens.currentKid
  const oldToken = (await tokens.issue('alice')).token

  const before = Date.now()
  const rotated = await keygate(['tokens', 'rotate'], env)
  t.equal(rotated.code, 0, rotated.stderr)
  const [, shownPrefix, newKid] = ROTATED.exec(rotated.stdout) ?? []
  t.equal(shownPrefix, prefix)
  t.not(newKid, undefined, rotated.stdout)
  t.not(newKid, oldKid)
  // 60 s of token TTL + the default margin of 120 s
  const retires = new RegExp(`\\nprevious kid ${oldKid} verifies until (\\S+) \\(in 180 s\\), then retires\\n$`).exec(rotated.stdout)
  t.ok(retires, rotated.stdout)
  const retiresAt = Date.parse(retires?.[1] ?? '')
  t.ok(retiresAt >= before + 180_000 - 1000 && retiresAt <= Date.now() + 180_000, 'the time is the real one')

  // The running gateway: the next re-read (here forced; else within 30 s, or at the first token
  // with the new kid) makes it sign with the new key and publish both.
  await tokens.refresh()
  t.equal(tokens.currentKid, newKid, 'the running gateway signs with the new key')
  const jwks = (await send(gw.url, '/.well-known/jwks.json')).json<{ keys: Array<{ kid: string }> }>()
  t.same(jwks.keys.map((k) => k.kid), [newKid, oldKid], 'and publishes both keys')
  t.equal(await tokens.verify(oldToken), 'alice', 'a token of the old key still verifies')

  // An identity token of a route file that lives longer than a bearer token sets the retirement.
  const routes = routeFile(t, 'routes:\n  - prefix: /r/\n    upstream: http://127.0.0.1:1\n    auth: bearer\n    identityToken: { ttlSeconds: 3600 }\n')
  const again = await keygate(['tokens', 'rotate'], { ...env, KEYGATE_ROUTES: routes.path })
  t.equal(again.code, 0, again.stderr)
  t.match(again.stdout, new RegExp(`\\nprevious kid ${newKid} verifies until \\S+ \\(in 3720 s\\), then retires\\n$`), 'the longest identity-token TTL counts')

  const emptyPrefix = uniquePrefix('cli-rotate')
  t.teardown(async () => { await deletePrefix(redisUrl, emptyPrefix) })
  const first = await keygate(['tokens', 'rotate'], { ...env, KEYGATE_REDIS_PREFIX: emptyPrefix })
  t.equal(first.code, 0, first.stderr)
  t.match(first.stdout, /\nthere was no signing key before: gateways starting on this store will use this one\n$/)

  const keyFile = routeFile(t, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), 'key.pem')
  const cases: Array<[string, string[], Record<string, string>, number, RegExp]> = [
    ['no REDIS_URL', ['tokens', 'rotate'], {}, 2, /REDIS_URL is not set/],
    ['an extra argument', ['tokens', 'rotate', 'now'], env, 2, /^usage:/],
    ['unknown command', ['tokens', 'revoke'], env, 2, /^usage:/],
    ['a key file', ['tokens', 'rotate'], { ...env, KEYGATE_JWT_KEY_FILE: keyFile.path }, 1, /^keygate: KEYGATE_JWT_KEY_FILE is set/]
  ]
  for (const [name, args, caseEnv, code, message] of cases) {
    const res = await keygate(args, caseEnv)
    t.equal(res.code, code, name)
    t.match(res.stderr, message, name)
    t.equal(res.stdout, '', name)
  }
  t.match((await keygate(['help'], {})).stdout, /\n {7}keygate tokens rotate\n/, 'the usage text names the command')
})
