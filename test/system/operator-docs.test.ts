// The operator pages run as an operator runs them: docs/admin.md's blocks ("The admin API":
// the gateway started with its admin port, then "Users" and the curl calls of "Endpoints") and
// docs/cli.md's ("Other key types, and RFC 9421", "For operators: users and keys" and "Through
// the admin API"), each read from its page and run with bash in a scratch folder, against one
// gateway on Redis (a prefix of its own, given as KEYGATE_REDIS_PREFIX as cli.md tells
// operators to). `npm run keygate -- ...` and `keygate ...` run the compiled command of the
// shared build, and `npm run start:gateway` the compiled gateway (package.json's scripts run the
// same sources under tsx; checked below).
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { PassThrough, Readable } from 'node:stream'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { compiled, ROOT } from '../helpers/build.js'
import { docBlocks, docSnippet } from '../helpers/docs.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { deletePrefix, freePort, testRedisUrl, uniquePrefix } from '../helpers/redis.js'
import { interruptGroup, startCommand } from '../helpers/listening.js'
import { login, registerKey, startUpstreamStub } from '../helpers/stack.js'

t.setTimeout(120_000)

const KEYGATE_JS = await compiled('gateway/src/cli/keygate.ts')
const MAIN_JS = await compiled('gateway/src/main.ts')
/** the compiled command's runCli (no TypeScript to transpile first) */
const { runCli } = await import(KEYGATE_JS) as typeof import('../../gateway/src/cli/keygate.js')

/** what the pages' `npm run ...` and `keygate` mean, as bash functions on the compiled build */
const PRELUDE = `
npm () {
  case "$1 $2" in
    'run keygate') shift 2; [ "$1" = -- ] && shift; "$NODE" "$KEYGATE_JS" "$@" ;;
    'run start:gateway') "$NODE" "$MAIN_JS" ;;
    *) echo "not expected here: npm $*" >&2; return 127 ;;
  esac
}
keygate () { "$NODE" "$KEYGATE_JS" "$@"; }
`

interface Run { code: number | null; stdout: string; stderr: string }

/** `script` with bash -e-less (as typed, each line whatever the one before did), in `cwd`, with only `env` (and PATH) */
async function bash (script: string, env: Record<string, string>, options: { stdin?: string; cwd: string }): Promise<Run> {
  const child = spawn('bash', ['-c', PRELUDE + script], {
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', NODE: process.execPath, KEYGATE_JS, MAIN_JS, ...env }
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => { stdout += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  child.stdin.end(options.stdin ?? '')
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  return { code, stdout, stderr }
}

interface Call { args: string[]; stdin: string; env: Record<string, string> }

/**
 * The `npm run keygate -- ...` and `keygate ...` commands `script` makes, as bash expands them: each
 * one's arguments, what it reads on stdin (a pipe, or what the reader types: `stdin`) and the
 * environment it would run with. They then run in this process (the compiled runCli, as inProcess runs the source): a
 * Node.js process each would cost a second or two on a busy machine.
 */
async function calls (script: string, env: Record<string, string>, stdin: string, cwd: string): Promise<Call[]> {
  const dir = mkdtempSync(join(cwd, 'calls-'))
  const recorder = `
__record () {
  n=$(( $(cat "${dir}/count" 2>/dev/null || echo 0) + 1 )); echo "$n" > "${dir}/count"
  printf '%s\\0' "$@" > "${dir}/$n.args"; cat > "${dir}/$n.stdin"; env -0 > "${dir}/$n.env"; }
npm () { if [ "$1 $2 $3" = 'run keygate --' ]; then shift 3; __record "$@"; else echo "not expected here: npm $*" >&2; return 127; fi; }
keygate () { __record "$@"; }
`
  const child = spawn('bash', ['-c', recorder + script], { cwd, env: { PATH: process.env.PATH ?? '', ...env } })
  let stderr = ''
  child.stderr.on('data', (chunk: Buffer) => { stderr += chunk.toString() })
  child.stdin.end(stdin)
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve))
  if (code !== 0) throw new Error(`bash: ${stderr}`)
  const made: Call[] = []
  for (let n = 1; existsSync(join(dir, `${n}.args`)); n++) {
    const split = (file: string): string[] => readFileSync(join(dir, file), 'utf8').split('\0').slice(0, -1)
    made.push({
      args: split(`${n}.args`),
      stdin: readFileSync(join(dir, `${n}.stdin`), 'utf8'),
      env: Object.fromEntries(split(`${n}.env`).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
    })
  }
  rmSync(dir, { recursive: true, force: true })
  return made
}

/** one recorded command, run: what it printed, or the error it ended with */
async function runCall (call: Call): Promise<{ stdout: string; error: Error | undefined }> {
  const stdout = new PassThrough()
  let out = ''
  stdout.on('data', (chunk: Buffer) => { out += chunk.toString() })
  const stdin = Readable.from([Buffer.from(call.stdin)])
  try {
    await runCli(call.args, { stdin: stdin as unknown as NodeJS.ReadStream, stdout: stdout as unknown as NodeJS.WriteStream, env: call.env })
    return { stdout: out, error: undefined }
  } catch (err) {
    return { stdout: out, error: err as Error }
  }
}

/** the JSON values curl -s printed one after another (no newline between them) */
function jsonStream (text: string): unknown[] {
  const values: unknown[] = []
  let depth = 0
  let start = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text[i]
    if (inString) {
      if (c === '\\') i++
      else if (c === '"') inString = false
    } else if (c === '"') inString = true
    else if (c === '{' || c === '[') { if (depth++ === 0) start = i } else if (c === '}' || c === ']') {
      if (--depth === 0) values.push(JSON.parse(text.slice(start, i + 1)))
    }
  }
  return values
}

function scratch (t: Test, label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `keygate-${label}-`))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  return dir
}

t.test('package.json runs what the functions stand for', async (t) => {
  const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts
  t.match(scripts.keygate, /^node .*--import tsx gateway\/src\/cli\/keygate\.ts$/)
  t.match(scripts['start:gateway'], /^node .*--import tsx gateway\/src\/main\.ts$/)
})

t.test('docs/admin.md and docs/cli.md, run as written against one gateway on Redis', async (t) => {
  const redisUrl = await testRedisUrl()
  // The pages name the Redis on 127.0.0.1:6379; the test runs them on its own (REDIS_URL when set,
  // as the README promises), as it runs them on a free port where a page names 9180.
  const PAGE_REDIS = 'redis://127.0.0.1:6379'
  const onTestRedis = (block: string): string => block.replaceAll(PAGE_REDIS, redisUrl)
  const prefix = uniquePrefix('opdocs')
  t.teardown(async () => { await deletePrefix(redisUrl, prefix) })
  const upstream = await startUpstreamStub(t)
  const [port, adminPort] = [await freePort(), await freePort()]
  const url = `http://127.0.0.1:${port}`
  const adminUrl = `http://127.0.0.1:${adminPort}`
  const store = { KEYGATE_REDIS_PREFIX: prefix }

  // docs/admin.md, "The admin API": the token made and the gateway started. The port 9180 is
  // taken on a shared machine: a free one instead. The reader keeps the token ("in your secret
  // store"): here a file in the scratch folder.
  const [startBlock, endpointsBlock] = docBlocks('docs/admin.md', 'The admin API', 'sh') as [string, string]
  t.equal(endpointsBlock, docSnippet('docs/admin.md', 'Endpoints', 'sh'), 'the second block is the one of "Endpoints"')
  t.match(startBlock, `REDIS_URL=${PAGE_REDIS} npm run start:gateway`, 'the page starts the gateway on the Redis it names')
  const start = onTestRedis(startBlock)
    .replace(/^(export KEYGATE_ADMIN_TOKEN=.*)$/m, '$1\nprintf %s "$KEYGATE_ADMIN_TOKEN" > admin-token')
    .replace(/KEYGATE_ADMIN_PORT=9180/, `KEYGATE_ADMIN_PORT=${adminPort}`)
  t.match(start, `KEYGATE_ADMIN_PORT=${adminPort} REDIS_URL=${redisUrl} npm run start:gateway`)
  t.match(start, 'printf %s "$KEYGATE_ADMIN_TOKEN" > admin-token')
  const home = scratch(t, 'opdocs')
  const gateway = await startCommand('bash', ['-c', PRELUDE + start],
    { NODE: process.execPath, KEYGATE_JS, MAIN_JS, PORT: String(port), UPSTREAM_URL: upstream, ...store }, home,
    { detached: true, ready: /^.*keygate listens on (http:\/\/[0-9.:]+).*\n/m })
  t.teardown(async () => { await interruptGroup(gateway.child, 'SIGTERM') })
  // the whole startup line (a JSON log line): its message
  const startup = (JSON.parse(gateway.match[0]) as { msg: string }).msg
  const promised = /ends: \.\.\.(, metrics off, admin on port )9180\)/.exec(startBlock)?.[1]
  t.ok(promised, 'the block says how the startup line ends')
  t.ok(startup.endsWith(`${promised ?? ''}${adminPort})`), `the startup line ends as the block says: ${startup}`)
  const token = readFileSync(join(home, 'admin-token'), 'utf8')
  t.match(token, /^[0-9a-f]{64}$/, 'openssl rand -hex 32 made the token')

  const password1 = 'first password of alice'
  const password2 = 'second password of alice'
  const password3 = 'third password of alice'

  await t.test('admin.md, "Users": both ways of adding alice', async (t) => {
    const page = docSnippet('docs/admin.md', 'Users', 'sh')
    t.equal(page.split(`REDIS_URL=${PAGE_REDIS} `).length, 3, 'both commands name the page\'s Redis')
    const block = onTestRedis(page)
    // the second command asks: what the reader types comes on stdin
    const made = await calls(block, { NEW_PASSWORD: password1, ...store }, `${password2}\n`, home)
    t.same(made.map((c) => [c.args, c.stdin, c.env.REDIS_URL]), [
      [['users', 'add', 'alice'], password1, redisUrl],
      [['users', 'add', 'alice'], `${password2}\n`, redisUrl]
    ], 'the first reads the password from printf, the second from what the reader types')
    const where = `in ${redisUrl} (prefix ${prefix})`
    const runs = []
    for (const call of made) runs.push(await runCall(call))
    t.same(runs, [
      { stdout: `user alice created ${where}\n`, error: undefined },
      { stdout: `user alice updated ${where}\n`, error: undefined }
    ])
    t.type(await login(url, 'alice', password2), 'string', 'alice logs in with the password typed last')
    await t.rejects(login(url, 'alice', password1), /401/, 'and no more with the first')
  })

  let aliceKey = ''
  await t.test('cli.md, "Other key types, and RFC 9421": an Ed25519 key, registered, and RFC 9421 calls', async (t) => {
    const block = docSnippet('docs/cli.md', 'Other key types, and RFC 9421', 'sh')
    const clientHome = scratch(t, 'opdocs-client')
    const run = await bash(block, { HOME: clientHome, KEYGATE_URL: url, KEYGATE_USER: 'alice', KEYGATE_PASSWORD: password2 }, { cwd: clientHome })
    t.equal(run.code, 0, run.stderr)
    aliceKey = readFileSync(join(clientHome, '.keygate', 'edkey.apikey'), 'utf8').trim()
    t.match(aliceKey, /^[0-9a-f]{64}$/, 'register saved the apiKey beside the key')
    t.match(readFileSync(join(clientHome, '.keygate', 'edkey.pem'), 'utf8'), /^-----BEGIN PRIVATE KEY-----/)
    t.ok(run.stdout.includes(`${aliceKey}\n`), 'register printed it')
    const listings = run.stdout.split('\n').filter((line) => line.startsWith('{"items":'))
    t.equal(listings.length, 2, `both calls printed the list: ${run.stdout}`)
    t.match(run.stderr, /^\* {3}"@method": GET\n\* {3}"@target-uri": http:\/\/127\.0\.0\.1:\d+\/v1\/clients\/\n/m, 'the first covers @method and @target-uri')
    t.equal(run.stderr.match(/^(< )?200 OK$/gm)?.length, 2, `both answered 200: ${run.stderr}`)
  })

  const bob = 'password of bob the other user'
  const bobKeys = [rsaKeyPair(), rsaKeyPair()]
  await t.test('admin.md, "Endpoints": every curl call, top to bottom', async (t) => {
    const script = endpointsBlock.replace(/^ADMIN=http:\/\/127\.0\.0\.1:9180$/m, `ADMIN=${adminUrl}`)
    t.not(script, endpointsBlock, 'ADMIN is the admin port the gateway was started with')
    const run = await bash(script, { KEYGATE_ADMIN_TOKEN: token, NEW_PASSWORD: password3, APIKEY: aliceKey }, { cwd: home })
    t.equal(run.code, 0, run.stderr)
    const answers = jsonStream(run.stdout)
    const curls = endpointsBlock.match(/^curl /gm)?.length ?? 0
    t.equal(answers.length, curls, `one answer per curl (${curls})`)
    const [users, alice, passwordSet, scopesSet, removed, keys, key, patched, revoked, routes, reload, reloadAll, usage, openapi] =
      answers as Array<Record<string, unknown>>
    t.match(users, { items: [{ username: 'alice', activeKeys: 1, scopes: [] }], next_cursor: null })
    t.match(alice, { username: 'alice', activeKeys: 1, keys: 1 })
    t.match(passwordSet, { username: 'alice' }, 'the password set (200: she existed)')
    t.match(scopesSet, { username: 'alice', scopes: ['clients:read', 'clients:write'] })
    t.match(removed, { username: 'alice', revokedKeyCount: 1, revokedKeys: [aliceKey] })
    t.match(keys, { items: [], next_cursor: null }, 'a removed user has no keys listed')
    t.match(key, { apiKey: aliceKey, owner: 'alice', status: 'revoked', publicKey: /^-----BEGIN PUBLIC KEY-----/ })
    t.match(patched, { code: 'KEY_NOT_ACTIVE', keyStatus: 'revoked' }, 'a revoked key is not changed (409)')
    t.match(revoked, { apiKey: aliceKey, status: 'revoked', alreadyRevoked: true })
    t.match(routes, { file: null, items: Array })
    t.ok((routes?.items as unknown[]).length > 0, 'the built-in routes')
    t.match(reload, { code: 'NO_ROUTE_FILE' }, 'the gateway was started without KEYGATE_ROUTES')
    const none = { file: null, added: [], removed: [], changed: [] }
    t.same(reloadAll, { routes: none, issuers: none, agents: none }, 'none of the three files: nothing reloaded')
    t.match(usage, { code: 'USER_NOT_FOUND' }, 'alice is removed by then')
    t.match(openapi, { openapi: /^3\.1/, paths: { '/v1/users': Object } })
  })

  // bob, with a key to give as APIKEY (the page's placeholder) to the next two blocks
  const adminPut = await fetch(`${adminUrl}/v1/users/bob`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    body: JSON.stringify({ password: bob, scopes: ['clients:read', 'clients:write'] })
  })
  t.equal(adminPut.status, 201)
  const bobToken = await login(url, 'bob', bob)
  for (const keys of bobKeys) t.equal((await registerKey(url, bobToken, keys)).status, 201)
  const [first, second] = bobKeys.map((k) => k.apiKey) as [string, string]

  await t.test('cli.md, "For operators: users and keys": each command as typed, on the Redis', async (t) => {
    const [block] = docBlocks('docs/cli.md', 'For operators: users and keys', 'sh') as [string]
    const lines = block.split('\n').filter((line) => line.startsWith('npm run keygate'))
    t.equal(lines.length, 11)
    const out: string[] = []
    for (const line of lines) {
      const command = line.replaceAll('APIKEY', first)
      if (line.includes('APIKEY')) t.not(command, line, 'APIKEY: one of bob\'s keys')
      // each command on its own, as typed at a prompt: a password asked for is typed on stdin
      const [call] = await calls(command, { REDIS_URL: redisUrl, ...store }, `${password1}\n`, home)
      const run = await runCall(call as Call)
      t.equal(run.error, undefined, line)
      out.push(run.stdout)
    }
    const where = `in ${redisUrl} (prefix ${prefix})`
    t.equal(out[0], `user alice created ${where}\n`)
    t.equal(out[1], `user alice updated ${where}, scopes: clients:read clients:write\n`)
    t.match(out[2], /clients:read reports:read/)
    t.match(out[3], /^password of alice changed/)
    t.match(out[4], /^USERNAME .*\nalice .* clients:read reports:read\nbob .*\n2 users\n$/s)
    t.match(out[5], /alice removed/)
    t.match(out[6], new RegExp(`^APIKEY .*\\n${second} +bob .*\\n${first} +bob .*\\n${aliceKey} +alice .*revoked.*\\n3 keys\\n$`, 's'))
    t.equal(out[7], out[6], 'one page of 50 is all of them')
    t.match(out[8], first)
    t.match(out[8], /-----BEGIN PUBLIC KEY-----/)
    t.match(out[9], /clients:read/)
    t.match(out[9], /2027-01-01/)
    t.match(out[10], /revoked/)
    const key = await fetch(`${adminUrl}/v1/keys/${first}`, { headers: { authorization: `Bearer ${token}` } })
    t.match(await key.json(), { status: 'revoked', scopes: ['clients:read'], expiresAt: '2027-01-01T00:00:00.000Z' })
  })

  await t.test('cli.md, "Through the admin API": the same, from anywhere the admin port is reached', async (t) => {
    const block = docSnippet('docs/cli.md', 'Through the admin API', 'sh')
    t.equal(docBlocks('docs/cli.md', 'For operators: users and keys', 'sh')[1], block, 'the second block of the section')
    // the page's admin URL and token are examples: this gateway's
    const script = block.replace(/^export KEYGATE_ADMIN_URL=http:\/\/10\.0\.0\.7:9180 KEYGATE_ADMIN_TOKEN=\.\.\.$/m,
      `export KEYGATE_ADMIN_URL=${adminUrl} KEYGATE_ADMIN_TOKEN=${token}`)
    t.not(script, block, 'the admin URL and token filled in')
    const made = await calls(script, { PW: password1, APIKEY: second }, '', home)
    t.equal(made.length, 5)
    t.ok(made.every((c) => c.env.KEYGATE_ADMIN_URL === adminUrl && c.env.KEYGATE_ADMIN_TOKEN === token && c.env.REDIS_URL === undefined),
      'each runs with the admin URL and token, and nothing of Redis')
    const run = { stdout: '' }
    for (const call of made) {
      const one = await runCall(call)
      t.equal(one.error, undefined, call.args.join(' '))
      run.stdout += one.stdout
    }
    const where = `in the store behind the admin API at ${adminUrl}`
    const lines = run.stdout.split('\n')
    t.equal(lines[0], `user alice created ${where}, scopes: clients:read`)
    t.match(run.stdout, /clients:read clients:write/)
    t.match(run.stdout, /\n0 keys of alice\n/, 'keys list --user alice: she has none')
    t.type(await login(url, 'alice', password1), 'string', 'alice logs in with $PW')
    const key = await fetch(`${adminUrl}/v1/keys/${second}`, { headers: { authorization: `Bearer ${token}` } })
    t.match(await key.json(), { status: 'revoked', scopes: ['clients:read'], expiresAt: '2027-01-01T00:00:00.000Z' })
  })
})
