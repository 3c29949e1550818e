// `npm run keygate -- users add NAME` as an operator runs it: a child process, the password on
// stdin, the running gateways' Redis; then the user logs in at a gateway on that Redis.
import t from 'tap'
import { keygateCli } from '../../../helpers/cli.js'
import { deletePrefix, testRedisUrl, uniquePrefix } from '../../../helpers/redis.js'
import { login, startStack } from '../../../helpers/stack.js'

const keygate = keygateCli

t.test('routes check', async (t) => {
  const good = await keygate(['routes', 'check', 'gateway/examples/routes.yaml'], '', {})
  t.equal(good.code, 0, good.stderr)
  t.match(good.stdout, /^MATCH +METHODS +AUTH +UPSTREAM/)
  t.match(good.stdout, /\/reports\/\* +GET +signed\+identity-token +http:\/\/upstream:8081 +\/v1\/clients\/\*/)
  t.match(good.stdout, /gateway\/examples\/routes\.yaml: 4 routes, valid\n$/)
  t.notMatch(good.stdout + good.stderr, /warning/i, 'the shipped example: no warning')
  // --json, for scripts: the routes as the admin API shows them (addHeaders' values hidden), and the same notes
  const json = await keygate(['routes', 'check', '--json', 'gateway/examples/routes.yaml'], '', {})
  t.equal(json.code, 0, json.stderr)
  const checked = JSON.parse(json.stdout) as { file: string; items: Array<Record<string, unknown>>; aliasGuards: string[]; warnings: string[] }
  t.same(Object.keys(checked), ['file', 'items', 'aliasGuards', 'warnings'])
  t.equal(checked.file, 'gateway/examples/routes.yaml')
  t.same(checked.items.map((r) => [r.name, r.auth, r.upstream, r.timeoutMs]), [
    ['routes[0]', 'signed', 'http://upstream:8081', 30000],
    ['routes[1]', 'signed', 'http://upstream:8081', 30000],
    ['reports', 'signed', 'http://upstream:8081', 5000],
    ['status', 'public', 'http://upstream:8081', 30000]
  ], 'every route, in the file\'s order')
  t.same(checked.items[2]?.addHeaders, { 'x-forwarded-by': '***' }, 'a header\'s value is not shown: it may be a credential')
  t.same(checked.warnings, [])
  const { mkdtempSync, writeFileSync } = await import('node:fs')
  const { join } = await import('node:path')
  const { tmpdir } = await import('node:os')
  const dir = mkdtempSync(join(tmpdir(), 'keygate-cli-'))
  writeFileSync(join(dir, 'bad.yaml'), 'routes:\n  - prefix: /a/\n    upstream: http://x\n    auth: sigend\n')
  const bad = await keygate(['routes', 'check', join(dir, 'bad.yaml')], '', {})
  t.equal(bad.code, 1)
  t.equal(bad.stderr, 'bad.yaml: routes[0].auth: "sigend" is not one of signed, bearer, agent, public\n')
  t.equal(bad.stdout, '')
  const badJson = await keygate(['routes', 'check', '--json', join(dir, 'bad.yaml')], '', {})
  t.same([badJson.code, badJson.stderr, badJson.stdout], [bad.code, bad.stderr, ''], '--json: a mistake is said as without it')
  const two = await keygate(['routes', 'check', 'gateway/examples/routes.yaml', join(dir, 'bad.yaml'), '--json'], '', {})
  t.equal(two.code, 2, 'one file at a time')
  t.match(two.stderr, /routes check FILE \[--json\]/)

  // a weaker route forwarding into a stronger one's path space: warned, naming both; still valid
  writeFileSync(join(dir, 'alias.yaml'), 'routes:\n  - { name: clients, prefix: /v1/clients/, upstream: http://u, auth: signed }\n' +
    '  - { name: reports, prefix: /reports/, upstream: http://u, auth: bearer, rewrite: /v1/clients/ }\n')
  const alias = await keygate(['routes', 'check', join(dir, 'alias.yaml')], '', {})
  t.equal(alias.code, 0, 'a warning is not fatal')
  t.match(alias.stdout, new RegExp(`${join(dir, 'alias.yaml')}: warning: reports \\(bearer\\) forwards into the path space of clients \\(signed\\) on http://u: `))
  t.match(alias.stdout, /alias\.yaml: 2 routes, valid, 1 warning\n$/)
  // what the stronger route's backendNormalises (default: all three) protects, against which routes
  t.match(alias.stdout, /alias\.yaml: alias guard: clients \(signed\) on http:\/\/u, against reports \(bearer\): protects backends with case folding .*; a trailing slash added or dropped .*; trailing dots and spaces trimmed/)
  const aliasJson = await keygate(['routes', 'check', join(dir, 'alias.yaml'), '--json'], '', {})
  t.equal(aliasJson.code, 0, aliasJson.stderr)
  const notes = JSON.parse(aliasJson.stdout) as { aliasGuards: string[]; warnings: string[] }
  const lines = (prefix: string): string[] => alias.stdout.split('\n').filter((line) => line.startsWith(prefix)).map((line) => line.slice(prefix.length))
  t.same(notes.warnings, lines(`${join(dir, 'alias.yaml')}: warning: `), '--json: the warnings the table\'s lines say')
  t.same(notes.aliasGuards, lines(`${join(dir, 'alias.yaml')}: alias guard`).map((rest) => `alias guard${rest}`), 'and the alias guards')
  t.equal(notes.warnings.length, 1)

  // a route that opts out of the seed body rule: warned, saying what it lets through; still valid
  writeFileSync(join(dir, 'forms.yaml'), 'routes:\n  - { name: forms, prefix: /forms/, upstream: http://u, auth: signed, seedBodyBoundary: unchecked }\n')
  const forms = await keygate(['routes', 'check', join(dir, 'forms.yaml')], '', {})
  t.equal(forms.code, 0, 'a warning is not fatal')
  t.match(forms.stdout, /forms\.yaml: warning: forms \(signed\) has seedBodyBoundary: unchecked: .* one seed signature also authorizes/)
  t.match(forms.stdout, /forms\.yaml: 1 route, valid, 1 warning\n$/)

  // a rewrite that glues segments: refused, naming the route
  writeFileSync(join(dir, 'glue.yaml'), 'routes:\n  - { name: reports, prefix: /reports/, upstream: http://u, auth: signed, rewrite: /v1/clients }\n')
  const glue = await keygate(['routes', 'check', join(dir, 'glue.yaml')], '', {})
  t.equal(glue.code, 1)
  t.equal(glue.stderr, 'glue.yaml: routes[0].rewrite: "/v1/clients" glues segments: the prefix "/reports/" ends in "/" and the rewrite does not, ' +
    'so /reports/-admin would be forwarded as /v1/clients-admin; end both in "/" or neither\n')
})

t.test('users add', async (t) => {
  const redisUrl = await testRedisUrl()
  const prefix = uniquePrefix('cli')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const env = { REDIS_URL: redisUrl, KEYGATE_REDIS_PREFIX: prefix }

  const created = await keygate(['users', 'add', 'carol'], 'first password\n', env)
  t.equal(created.code, 0, created.stderr)
  t.match(created.stdout, /user carol created/)

  const gw = await startStack(t, { store: 'redis', redisPrefix: prefix })
  t.type(await login(gw.url, 'carol', 'first password'), 'string', 'the trailing newline is not part of the password')

  const updated = await keygate(['users', 'add', 'carol'], 'second password', env)
  t.equal(updated.code, 0, updated.stderr)
  t.match(updated.stdout, /user carol updated/)
  t.type(await login(gw.url, 'carol', 'second password'), 'string', 'a running gateway sees the new password')
  await t.rejects(login(gw.url, 'carol', 'first password'), /401/)

  const cases: Array<[string, string[], string, Record<string, string>, number, RegExp]> = [
    ['no REDIS_URL', ['users', 'add', 'dave'], 'password1', {}, 2, /REDIS_URL is not set/],
    ['no name', ['users', 'add'], 'password1', env, 2, /^users add takes one argument\n\nusage:/],
    ['unknown command', ['users', 'drop', 'dave'], 'password1', env, 2, /^unknown command: users drop\n\nusage:/],
    ['a short password', ['users', 'add', 'dave'], 'short', env, 1, /^VALIDATION_FAILED: /],
    ['a bad username', ['users', 'add', 'da ve'], 'password1', env, 1, /^VALIDATION_FAILED: /],
    ['a bad REDIS_URL', ['users', 'add', 'dave'], 'password1', { REDIS_URL: 'nonsense' }, 1, /^REDIS_URL: /]
  ]
  for (const [name, args, stdin, caseEnv, code, message] of cases) {
    const res = await keygate(args, stdin, caseEnv)
    t.equal(res.code, code, name)
    t.match(res.stderr, message, name)
  }
})

t.test('help, version, and a mistyped command answered in one line', async (t) => {
  const { readFileSync } = await import('node:fs')
  const version = (JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')) as { version: string }).version
  for (const args of [['--help'], ['-h'], ['help'], []]) {
    const res = await keygate(args, '', {})
    t.equal(res.code, 0, `${args.join(' ') || '(nothing)'}: exit 0`)
    t.match(res.stdout, /^usage: keygate serve\n {7}keygate demo\n {7}keygate reload \| stop\n {7}keygate keygen/, `${args.join(' ') || '(nothing)'}: the usage on stdout`)
    t.equal(res.stderr, '')
  }
  const shown = await keygate(['--version'], '', {})
  t.same([shown.code, shown.stdout, shown.stderr], [0, `keygate ${version}\n`, ''])
  const cases: Array<[string, string]> = [
    ['kegen', 'keygate: unknown command "kegen"; did you mean "keygen"? (keygate --help lists them)\n'],
    ['Users', 'keygate: unknown command "Users"; did you mean "users"? (keygate --help lists them)\n'],
    ['rout', 'keygate: unknown command "rout"; did you mean "routes"? (keygate --help lists them)\n'],
    ['frobnicate', 'keygate: unknown command "frobnicate" (keygate --help lists them)\n']
  ]
  for (const [typed, line] of cases) {
    const res = await keygate([typed, 'x'], '', {})
    t.same([res.code, res.stderr, res.stdout], [2, line, ''], `${typed}: one line, exit 2, no usage dump`)
  }
})
