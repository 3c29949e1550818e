// The operator CLI over the admin API: `keygate users ...` and `keygate keys ...` as child
// processes whose environment holds KEYGATE_ADMIN_URL and KEYGATE_ADMIN_TOKEN and nothing of
// Redis, against a running gateway on Redis. They print what the direct way prints (compared
// with it on the same store), exit as it does, and say clearly what only this way meets: a
// refused token, an admin URL nobody answers, a command the admin API has no form of. The scope
// commands (users scopes, users add --scopes, keys update) go through it too.
import t from 'tap'
import { newAdminToken, startAdminGateway } from '../helpers/admin.js'
import { inProcess, keygateCli as keygate } from '../helpers/cli.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { freePort, testRedisUrl } from '../helpers/redis.js'
import { login, registerKey, sendSigned, startUpstreamStub } from '../helpers/stack.js'

/** runCli in this process, the direct way (on the Redis): its output */
async function direct (args: string[], env: Record<string, string>): Promise<string> {
  const { stdout, error } = await inProcess(args, env)
  if (error !== undefined) throw error
  return stdout
}

t.test('users and keys through the admin API, with no Redis in the environment', async (t) => {
  const upstream = await startUpstreamStub(t)
  const gw = await startAdminGateway(t, { upstreamUrl: upstream })
  const env = { KEYGATE_ADMIN_URL: gw.adminUrl, KEYGATE_ADMIN_TOKEN: gw.token }
  const where = `the store behind the admin API at ${gw.adminUrl}`

  await t.test('users add, passwd, list', async (t) => {
    const added = await keygate(['users', 'add', 'frank'], 'a password of frank\n', env)
    t.equal(added.code, 0, added.stderr)
    t.equal(added.stdout, `user frank created in ${where}\n`)
    t.type(await login(gw.url, 'frank', 'a password of frank'), 'string', 'frank logs in at the gateway')
    const again = await keygate(['users', 'add', 'frank'], 'another password\n', env)
    t.equal(again.stdout, `user frank updated in ${where}\n`)
    const passwd = await keygate(['users', 'passwd', 'frank'], 'the third password\n', env)
    t.equal(passwd.code, 0, passwd.stderr)
    t.equal(passwd.stdout, `password of frank changed in ${where}; every gateway on it refuses the tokens issued before within a second\n`)
    t.type(await login(gw.url, 'frank', 'the third password'), 'string')
    const list = await keygate(['users', 'list'], '', env)
    t.match(list.stdout, /^USERNAME +CREATED +PASSWORD CHANGED +ACTIVE KEYS +KEYS +SCOPES\nfrank +\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ +\S+ \S+ +0 +0 +-\n1 user\n$/)
  })

  await t.test('keys list, show, revoke; users remove', async (t) => {
    const token = await login(gw.url, 'frank', 'the third password')
    const laptop = rsaKeyPair()
    const phone = rsaKeyPair()
    t.equal((await registerKey(gw.url, token, laptop, 'laptop')).status, 201)
    t.equal((await registerKey(gw.url, token, phone, 'phone')).status, 201)
    t.equal((await sendSigned(gw.url, { keys: laptop, token, method: 'GET', target: '/v1/clients/' })).status, 200)

    const list = await keygate(['keys', 'list', '--user', 'frank'], '', env)
    t.equal(list.code, 0, list.stderr)
    const lines = list.stdout.trimEnd().split('\n')
    t.match(lines[0], /^APIKEY +OWNER +NAME +STATUS +CREATED +LAST USED +EXPIRES +SCOPES$/)
    t.same(lines.slice(1, 3).map((l) => l.split(/ {2,}/).slice(0, 4)), [[phone.apiKey, 'frank', 'phone', 'active'], [laptop.apiKey, 'frank', 'laptop', 'active']])
    t.equal(lines[3], '2 keys of frank')
    const show = await keygate(['keys', 'show', laptop.apiKey, '--json'], '', env)
    t.match(JSON.parse(show.stdout), { owner: 'frank', apiKey: laptop.apiKey, name: 'laptop', status: 'active', publicKey: laptop.publicPem })

    const revoked = await keygate(['keys', 'revoke', laptop.apiKey], '', env)
    t.equal(revoked.code, 0, revoked.stderr)
    t.equal(revoked.stdout, `key ${laptop.apiKey} (frank, "laptop") revoked; every gateway on ${where} refuses it within a second\n`)
    t.equal((await sendSigned(gw.url, { keys: laptop, token, method: 'GET', target: '/v1/clients/' })).json().code, 'UNKNOWN_API_KEY')
    const again = await keygate(['keys', 'revoke', laptop.apiKey], '', env)
    t.match(again.stdout, new RegExp(`^key ${laptop.apiKey} \\(frank, "laptop"\\) was already revoked at \\d{4}-`))

    const removed = await keygate(['users', 'remove', 'frank'], '', env)
    t.equal(removed.code, 0, removed.stderr)
    t.match(removed.stdout, new RegExp(`^user frank removed from ${where.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}; 1 key revoked \\(every gateway refuses it within a second\\)\n`))
    t.equal((await sendSigned(gw.url, { keys: phone, token, method: 'GET', target: '/v1/clients/' })).json().code, 'INVALID_TOKEN', 'frank\'s token is refused')
  })

  await t.test('the same output as the direct way, on the same store', async (t) => {
    await gw.app.keygate.users.upsert('grace', 'a password of grace')
    const token = await login(gw.url, 'grace', 'a password of grace')
    const key = rsaKeyPair()
    t.equal((await registerKey(gw.url, token, key, 'grace key')).status, 201)
    const directWay = { REDIS_URL: await testRedisUrl(), KEYGATE_REDIS_PREFIX: gw.config.redisPrefix }
    for (const args of [['users', 'list', '--json'], ['keys', 'list', '--json'], ['keys', 'list', '--user', 'grace'], ['keys', 'show', key.apiKey, '--json']]) {
      const viaAdmin = await keygate(args, '', env)
      t.equal(viaAdmin.code, 0, viaAdmin.stderr)
      t.equal(viaAdmin.stdout, await direct(args, directWay), `${args.join(' ')}: the same`)
    }
  })

  await t.test('scopes: users add --scopes, users scopes, keys update; the gateway follows', async (t) => {
    const added = await keygate(['users', 'add', 'ivy', '--scopes', 'clients:read,reports:read'], 'a password of ivy\n', env)
    t.equal(added.code, 0, added.stderr)
    t.equal(added.stdout, `user ivy created in ${where}, scopes: clients:read reports:read\n`)
    const shown = await keygate(['users', 'scopes', 'ivy'], '', env)
    t.equal(shown.stdout, 'scopes of ivy: clients:read reports:read\n')
    const set = await keygate(['users', 'scopes', 'ivy', 'clients:read', 'clients:write'], '', env)
    t.equal(set.code, 0, set.stderr)
    t.match(set.stdout, `scopes of ivy set to clients:read clients:write (were: clients:read reports:read) in ${where}\n`)
    t.same((await gw.app.keygate.store.getUser('ivy'))?.scopes, ['clients:read', 'clients:write'], 'stored')

    const token = await login(gw.url, 'ivy', 'a password of ivy')
    const key = rsaKeyPair()
    t.same((await registerKey(gw.url, token, key, 'ivy key')).json().scopes, ['clients:read', 'clients:write'])
    const updated = await keygate(['keys', 'update', key.apiKey, '--scopes', 'clients:read', '--expires-at', '2030-01-01T00:00:00Z'], '', env)
    t.equal(updated.code, 0, updated.stderr)
    t.equal(updated.stdout, `key ${key.apiKey} (ivy, "ivy key") updated: scopes clients:read, expires 2030-01-01 00:00:00Z; ` +
      `every gateway on ${where} applies it within a second\n`)
    t.match(await gw.app.keygate.store.getKey(key.apiKey), { scopes: ['clients:read'], expiresAt: '2030-01-01T00:00:00.000Z' })
    const cleared = await keygate(['keys', 'update', key.apiKey, '--no-scopes', '--expires-at', 'never'], '', env)
    t.match(cleared.stdout, /updated: scopes -, expires -;/)
    const extra = await keygate(['keys', 'update', key.apiKey, '--scopes', 'billing:admin'], '', env)
    t.equal(extra.code, 1)
    t.match(extra.stderr, /^VALIDATION_FAILED: .*billing:admin/)
    const nothing = await keygate(['keys', 'update', key.apiKey], '', env)
    t.equal(nothing.code, 2)
    t.match(nothing.stderr, /^keys update needs --scopes A,B, --no-scopes or --expires-at ISO\|never/)
    t.equal((await keygate(['keys', 'revoke', key.apiKey], '', env)).code, 0)
    const revoked = await keygate(['keys', 'update', key.apiKey, '--scopes', 'clients:read'], '', env)
    t.equal(revoked.code, 1)
    t.equal(revoked.stderr, `keygate: key ${key.apiKey} (ivy, "ivy key") is revoked: it can never sign again, so it was left as it is\n`)
    const directWay = { REDIS_URL: await testRedisUrl(), KEYGATE_REDIS_PREFIX: gw.config.redisPrefix }
    t.equal((await keygate(['users', 'scopes', 'ivy'], '', env)).stdout, await direct(['users', 'scopes', 'ivy'], directWay), 'the same as the direct way')
  })

  await t.test('mistakes and failures: clear words, the same exit codes', async (t) => {
    const deadPort = await freePort()
    const [noUser, noKey, shortPassword, wrongToken, unreachable, urlWithoutToken, badUrl, rotate] = await Promise.all([
      keygate(['users', 'passwd', 'nobody'], '', env),
      keygate(['keys', 'show', 'f'.repeat(64)], '', env),
      keygate(['users', 'add', 'henry'], 'short\n', env),
      keygate(['users', 'list'], '', { ...env, KEYGATE_ADMIN_TOKEN: newAdminToken() }),
      keygate(['keys', 'list'], '', { ...env, KEYGATE_ADMIN_URL: `http://127.0.0.1:${deadPort}` }),
      keygate(['users', 'list'], '', { KEYGATE_ADMIN_URL: gw.adminUrl }),
      keygate(['users', 'list'], '', { ...env, KEYGATE_ADMIN_URL: 'ftp://somewhere' }),
      keygate(['tokens', 'rotate'], '', env)
    ])
    t.equal(noUser.code, 1)
    t.equal(noUser.stderr, `keygate: no user nobody in ${where}; create it with: users add nobody\n`)
    t.equal(noKey.code, 1)
    t.equal(noKey.stderr, `keygate: no key ${'f'.repeat(64)} in ${where}\n`)
    t.equal(shortPassword.code, 1)
    t.equal(shortPassword.stderr, 'VALIDATION_FAILED: A password is 8 to 1024 characters\n', 'the user service\'s words, as the direct way prints them')
    t.equal(wrongToken.code, 1)
    t.match(wrongToken.stderr, `keygate: the admin API at ${gw.adminUrl} refused the token (INVALID_TOKEN): KEYGATE_ADMIN_TOKEN must be the gateway's own`)
    t.notOk(wrongToken.stderr.includes(gw.token), 'no token printed')
    t.equal(unreachable.code, 1)
    t.match(unreachable.stderr, `keygate: the admin API at http://127.0.0.1:${deadPort} cannot be reached (ECONNREFUSED): check KEYGATE_ADMIN_URL`)
    t.equal(urlWithoutToken.code, 2, 'a usage error')
    t.match(urlWithoutToken.stderr, /^KEYGATE_ADMIN_URL is set but KEYGATE_ADMIN_TOKEN is not/)
    t.equal(badUrl.code, 2)
    t.match(badUrl.stderr, /^KEYGATE_ADMIN_URL: "ftp:\/\/somewhere" is not allowed/)
    t.equal(rotate.code, 2)
    t.match(rotate.stderr, /^REDIS_URL is not set .*tokens rotate works on the Redis directly: the admin API \(KEYGATE_ADMIN_URL\) has no form of it/)
    t.equal((await keygate(['users', 'list'], '', {})).code, 2, 'with neither, the direct way still needs REDIS_URL')
  })
})
