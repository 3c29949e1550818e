#!/usr/bin/env node
// `keygate <command>` (in a checkout: `npm run keygate -- <command>`, or `npx keygate <command>`
// through bin/keygate.js): the gateway, and client developers' and operators' commands.
//   serve | demo       the gateway (process/serve.ts, process/demo.ts); reload | stop: signal it
//                      through its PID file (signal-commands.ts)
//   keygen | login | register | call   sign and send as a client (client-commands.ts)
//   users add|passwd|remove|scopes NAME, users list, keys list|show|update|revoke: see cli/operator.ts; on the
//                      gateways' Redis, or through the admin API (KEYGATE_ADMIN_URL, cli/admin-client.ts)
//   routes check FILE  validate a route file and print the table of routes it makes
//   tokens rotate      make a new token-signing key current for every gateway on that Redis
//
// It starts fast: only what every command needs is imported up front; the store, the config
// schema, the route file parser and the operator commands load when a command needs them.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { constants as osConstants } from 'node:os'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { CLIENT_COMMANDS, ClientUsageError, RequestFailed, runClientCommand, type ClientCommand } from './client-commands.js'
import { ConfigError } from '../config/config-error.js'
import type { GatewayConfig } from '../config/env.js'
import { GatewayError } from '../errors.js'
import { endQuietlyOnClosedPipe } from '../lib/closed-pipe.js'
import { keygateCommand } from '../lib/command-name.js'
import { isMainModule } from '../lib/is-main-module.js'
import { formatTable } from '../lib/table.js'
import { keygateVersion } from '../lib/version.js'
import type { RouteConfig } from '../proxy/route.js'
import type { RedisConnection } from '../store/redis-connection.js'

/** the commands, for `--help` and for a "did you mean" */
export const COMMANDS = ['serve', 'demo', 'reload', 'stop', ...CLIENT_COMMANDS, 'users', 'keys', 'usage', 'routes', 'tokens', 'bench'] as const

const CMD = keygateCommand()
const USAGE = `usage: ${CMD} serve
       ${CMD} demo
       ${CMD} reload | stop
       ${CMD} keygen [--type rsa|ed25519|p256] [--out DIR] [--name NAME]
       ${CMD} login [--url URL] [--user USER] [--password PASSWORD]
       ${CMD} register [--name NAME] [--key FILE] [--scopes A,B] [--url URL] [--user USER --password PASSWORD | --token TOKEN]
       ${CMD} call METHOD TARGET [BODY | @FILE | @-] [-v] [-H 'Name: value']... [--key FILE] [--url ...]
                   [--scheme seed|rfc9421] [--components target-uri|path]
       ${CMD} users add|passwd|remove NAME
       ${CMD} users add NAME --scopes A,B
       ${CMD} users scopes NAME [SCOPE ...] | --none
       ${CMD} users list [--limit N] [--cursor C] [--json]
       ${CMD} keys list [--user NAME] [--limit N] [--cursor C] [--json]
       ${CMD} keys show|revoke APIKEY
       ${CMD} keys update APIKEY [--scopes A,B | --no-scopes] [--expires-at ISO | never]
       ${CMD} usage top --by key|user|route|agent [--order requests|refusals] [--since 1h] [--limit N] [--json]
       ${CMD} usage series --key APIKEY | --user NAME | --route NAME | --agent ORIGIN [--since 6h] [--json]
       ${CMD} routes check FILE [--json]
       ${CMD} tokens rotate
       ${CMD} bench [--url URL --user USER --password PASSWORD] [options]

To run keygate:
  serve              the gateway, configured by its environment (PORT, UPSTREAM_URL, REDIS_URL,
                     KEYGATE_ROUTES, ...: see docs/configuration.md), as npm run start:gateway runs it
  demo               the gateway in front of the example clients service, as npm start runs it
  reload             SIGHUP to the gateway whose PID file KEYGATE_PID_FILE names: it re-reads its
                     route, issuers and agents files (KEYGATE_ROUTES, KEYGATE_ISSUERS,
                     KEYGATE_AGENT_DIRECTORIES), all or nothing
  stop               SIGTERM to that gateway, and wait until it has finished the requests in flight
                     and exited

For client developers:
  keygen             make a key pair: DIR/NAME.pem (private, PKCS#8, mode 0600) and DIR/NAME.pub.pem;
                     --type rsa (RSA-2048, the default), ed25519 or p256 (EC P-256); DIR is
                     ~/.keygate, NAME is "default" unless given; never overwrites a file
  login              log in and print the bearer token (for KEYGATE_TOKEN)
  register           log in (or use the token) and register the public half of the key (--key FILE,
                     else ~/.keygate/NAME.pem) under NAME (default: the file's name); prints the
                     apiKey and saves it beside the key (NAME.apikey). --scopes A,B: the key may do
                     only that, some of the user's scopes (default: all of them, as they are now)
  call               sign METHOD TARGET BODY with the key and send it with the token, like curl:
                     the status on stderr, the answer's body on stdout; exit 1 on 4xx/5xx.
                     TARGET is the path and query as signed (/v1/clients/?limit=10); BODY is sent
                     byte for byte (@FILE: a file's bytes, @-: stdin). -v shows the signing string,
                     escaped, and the headers sent (the token shortened). --scheme rfc9421 signs
                     per RFC 9421 (Signature-Input, Signature, Content-Digest) instead of the X-API-*
                     headers; --components path covers @path and @query instead of @target-uri
                     (behind a proxy or load balancer that rewrites Host); -v shows the signature base
  Flags, else environment: --url KEYGATE_URL (default http://127.0.0.1:8080), --user KEYGATE_USER,
  --password KEYGATE_PASSWORD (else asked, or read from piped stdin), --token KEYGATE_TOKEN (else
  register and call log in with the user and password), --key KEYGATE_KEY.

For operators:
  users add NAME     create user NAME, or change its password (read from stdin:
                     typed at a prompt, or piped: printf %s "$PASSWORD" | ${CMD} users add NAME)
                     --scopes A,B sets its scopes too (else a new user has none, an existing one
                     keeps theirs)
  users passwd NAME  change the password of the existing user NAME (read as for users add)
  users scopes NAME SCOPE...
                     replace the scopes of user NAME (A B or A,B; --none: take them all); every
                     gateway applies them within a second, to the user's tokens and keys (a key
                     keeps only the scopes its user still has). Without scopes: show them
  users remove NAME  remove user NAME and revoke every key of theirs (every gateway refuses them
                     within a second), and every token issued to them
  users list         every user, with their number of keys and their scopes
  keys list          every key (--user NAME: that user's), newest first: owner, name, status
                     (active, revoked, expired), created, last used (to the minute), expiry, scopes.
                     Both lists print every item; --limit N (1 to 1000) prints one page, and
                     --cursor C the page after the one that printed C (--json: { items, next_cursor })
  keys show APIKEY   one key, with its public key (--json for scripts, as for the lists)
  keys update APIKEY change the key's scopes (--scopes A,B: some of its user's; --no-scopes: none)
                     and/or its expiry (--expires-at 2027-01-01T00:00:00Z, or never); every
                     gateway applies it within a second. A revoked or expired key stays as it is
  keys revoke APIKEY revoke the key: every gateway refuses it within a second; it stays revoked
  usage top          the keys, users or routes with the most requests (--order refusals: the most
                     refused) over the last --since (15m, 1h, 7d; at most 14d; default 1h), as every
                     gateway counted them: requests, refusals, by status class, refusals by code
  usage series       one key's, user's or route's requests over --since (default 6h): per minute up
                     to 6h, per hour beyond; the table lists the buckets that had requests, --json all
  routes check FILE  validate a route file (YAML or JSON) and print the routes it makes; --json:
                     { file, items, aliasGuards, warnings }, items as the admin API shows routes
  bench              load-test keygate (npm run bench: --help lists the options); with --url, any
                     running keygate, else one it starts and compares with a bare proxy
  tokens rotate      generate a new token-signing key and make it current; the replaced key keeps
                     verifying until every token it signed has expired (the longest token lifetime
                     of KEYGATE_TOKEN_TTL_SECONDS and the identity tokens of KEYGATE_ROUTES, plus
                     a margin), then retires. Running gateways pick it up without a restart.

users, keys and usage work through a gateway's admin API when KEYGATE_ADMIN_URL (e.g.
http://10.0.0.7:9180) and KEYGATE_ADMIN_TOKEN are both set: from anywhere that reaches the admin
port, with no Redis access. Otherwise, and always for tokens rotate (direct mode only: the admin API
has no form of it), they work on the Redis named by REDIS_URL, KEYGATE_REDIS_SENTINELS or
KEYGATE_REDIS_CLUSTER_NODES (and KEYGATE_REDIS_PREFIX), the store of the running gateways: run them
with the gateways' environment. Without any of them there is
nothing to change: the embedded store lives inside a gateway process; use KEYGATE_BOOTSTRAP_USERS
or the admin API there instead, and restart to get a new signing key.`

export class UsageError extends Error {}

/** The known command closest to a mistyped one (at most two edits away), if any. */
export function closestCommand (typed: string): string | undefined {
  const distance = (a: string, b: string): number => {
    let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
    for (let i = 1; i <= a.length; i++) {
      const current = [i]
      for (let j = 1; j <= b.length; j++) {
        current[j] = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + (a[i - 1] === b[j - 1] ? 0 : 1))
      }
      previous = current
    }
    return previous[b.length] ?? Infinity
  }
  let best: { command: string; distance: number } | undefined
  for (const command of COMMANDS) {
    const d = distance(typed.toLowerCase(), command)
    if (d <= 2 && (best === undefined || d < best.distance)) best = { command, distance: d }
  }
  return best?.command
}

async function loadConfig (env: NodeJS.ProcessEnv): Promise<GatewayConfig> {
  return (await import('../config/env.js')).loadConfig(env)
}

/** The gateways' Redis, which the store-changing commands need. */
async function requireRedis (config: GatewayConfig, directOnly?: string): Promise<RedisConnection> {
  const { redisConnection } = await import('../store/index.js')
  const connection = redisConnection(config)
  if (connection === undefined) {
    const only = directOnly === undefined ? '' : ` ${directOnly} works on the Redis directly: the admin API (KEYGATE_ADMIN_URL) has no form of it.`
    throw new UsageError(`REDIS_URL is not set (nor KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES).${only}\n\n${USAGE}`)
  }
  return connection
}

/**
 * Where `users` and `keys` act: the admin API when KEYGATE_ADMIN_URL and KEYGATE_ADMIN_TOKEN are
 * both set (no Redis needed), else the gateways' Redis.
 */
async function operatorBackend (env: NodeJS.ProcessEnv): Promise<import('./operator.js').OperatorBackend> {
  const admin = adminApiIn(env)
  if (admin !== undefined) return (await import('./admin-client.js')).adminApiBackend(admin.url, admin.token)
  const config = await loadConfig(env)
  await requireRedis(config)
  return await (await import('./operator.js')).directBackend(config)
}

/** KEYGATE_ADMIN_URL and KEYGATE_ADMIN_TOKEN, checked; undefined when KEYGATE_ADMIN_URL is not set */
function adminApiIn (env: NodeJS.ProcessEnv): { url: string; token: string } | undefined {
  const url = env.KEYGATE_ADMIN_URL ?? ''
  const token = env.KEYGATE_ADMIN_TOKEN ?? ''
  if (url === '') return undefined
  if (token === '') {
    throw new UsageError('KEYGATE_ADMIN_URL is set but KEYGATE_ADMIN_TOKEN is not: the admin API takes no request without the gateway\'s token')
  }
  if (!/^https?:\/\/[^/?#]+\/?$/i.test(url)) {
    throw new UsageError(`KEYGATE_ADMIN_URL: ${JSON.stringify(url)} is not allowed: use the admin API's origin, http(s)://host:port`)
  }
  return { url, token }
}

/** Where `usage` reads: the admin API as for users and keys, else the gateways' Redis. */
async function usageSource (env: NodeJS.ProcessEnv): Promise<import('./usage-commands.js').UsageSource> {
  const admin = adminApiIn(env)
  const commands = await import('./usage-commands.js')
  if (admin !== undefined) return commands.adminUsageSource((await import('./admin-client.js')).adminApi(admin.url, admin.token))
  const config = await loadConfig(env)
  await requireRedis(config)
  return await commands.directUsageSource(config)
}

async function readPassword (input: NodeJS.ReadStream, output: NodeJS.WriteStream): Promise<string> {
  if (input.isTTY !== true) {
    const chunks: Buffer[] = []
    for await (const chunk of input) chunks.push(chunk as Buffer)
    // One trailing newline is the shell's, not the password's.
    return Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '')
  }
  output.write('Password (not shown): ')
  const rl = createInterface({ input, terminal: true })
  // Silence the echo of what is typed.
  ;(rl as unknown as { _writeToOutput: (s: string) => void })._writeToOutput = () => {}
  const line = await new Promise<string>((resolve) => rl.once('line', resolve))
  rl.close()
  output.write('\n')
  return line
}

/** The route table as a person reads it: one line per route, most specific first. */
export function formatRouteTable (routes: readonly RouteConfig[]): string {
  const rows = [['MATCH', 'METHODS', 'AUTH', 'UPSTREAM', 'FORWARDED AS', 'TIMEOUT', 'BODY LIMIT', 'NAME']]
  const sorted = [...routes].sort((a, b) => Number(b.exact) - Number(a.exact) || b.prefix.length - a.prefix.length)
  for (const r of sorted) {
    rows.push([
      r.exact ? r.prefix : `${r.prefix}*`,
      r.methods.join(','),
      r.auth + (r.identityToken ? '+identity-token' : '') + (r.scopes.length > 0 ? ` [${r.scopes.join(' ')}]` : ''),
      r.upstream,
      r.rewrite === undefined ? '(unchanged)' : (r.exact ? r.rewrite : `${r.rewrite}*`),
      `${r.timeoutMs} ms`,
      `${r.bodyLimit} B`,
      r.name
    ])
  }
  return formatTable(rows)
}

/**
 * `routes check FILE [--json]`: the route table, each alias guard and warning, and a last line;
 * with --json one object: the routes as the admin API's GET /v1/routes shows them, the same notes.
 */
async function checkRoutes (file: string, json: boolean, io: { stdout: NodeJS.WritableStream, env: NodeJS.ProcessEnv }): Promise<void> {
  const [{ loadRouteFile }, { aliasGuards, routeWarnings }, { routeOptOuts }, { routeView }] = await Promise.all([
    import('../proxy/route-file.js'), import('../proxy/route-aliases.js'), import('../proxy/route-opt-outs.js'), import('../proxy/route.js')
  ])
  const routes = await loadRouteFile(file, (await loadConfig(io.env)).routeDefaults)
  // what each stronger route's backendNormalises protects: the backends whose aliases are refused
  const guards = aliasGuards(routes)
  // Warnings are never fatal: the gateway loads the file all the same (and logs them).
  const warnings = [...routeWarnings(routes), ...routeOptOuts(routes)]
  if (json) {
    const answer = { file, items: routes.map(routeView), aliasGuards: guards, warnings: warnings.map(({ text }) => text) }
    io.stdout.write(`${JSON.stringify(answer, null, 2)}\n`)
    return
  }
  io.stdout.write(formatRouteTable(routes))
  for (const line of guards) io.stdout.write(`${file}: ${line}\n`)
  for (const { text } of warnings) io.stdout.write(`${file}: warning: ${text}\n`)
  const warned = warnings.length === 0 ? '' : `, ${warnings.length} warning${warnings.length === 1 ? '' : 's'}`
  io.stdout.write(`${file}: ${routes.length} route${routes.length === 1 ? '' : 's'}, valid${warned}\n`)
}

/** Rotates the signing key on the gateways' Redis; prints the new kid and when the old key retires. */
async function rotateTokenKey (io: { stdout: NodeJS.WritableStream, env: NodeJS.ProcessEnv }): Promise<void> {
  const config = await loadConfig(io.env)
  const redis = await requireRedis(config, 'tokens rotate')
  const [{ defaultRoutes }, { loadRouteFile }, { createStore }, { describeRedis }, { DEFAULT_RETIRE_MARGIN_MS, retireAfterMs, rotateStoredSigningKey }] =
    await Promise.all([import('../proxy/route.js'), import('../proxy/route-file.js'), import('../store/index.js'),
      import('../store/redis-connection.js'), import('../tokens/signing-key-ring.js')])
  if (config.jwt.keyFile !== undefined) {
    throw new Error('KEYGATE_JWT_KEY_FILE is set: the gateways sign with that file\'s key, not with the key ring on Redis; ' +
      'rotate it by restarting them with a new key file')
  }
  // The replaced key must outlive every token it signed: bearer tokens and identity tokens alike.
  const routes = config.routesFile === undefined ? defaultRoutes(config.routeDefaults) : await loadRouteFile(config.routesFile, config.routeDefaults)
  const longestTtlSeconds = Math.max(config.jwt.ttlSeconds, ...routes.map((r) => r.identityToken?.ttlSeconds ?? 0))
  const store = await createStore(config)
  try {
    const { kid, replaced } = await rotateStoredSigningKey(store, retireAfterMs(longestTtlSeconds, DEFAULT_RETIRE_MARGIN_MS))
    io.stdout.write(`token signing key rotated in ${describeRedis(redis)} (prefix ${config.redisPrefix}): new kid ${kid}\n`)
    if (replaced === undefined) {
      io.stdout.write('there was no signing key before: gateways starting on this store will use this one\n')
    } else {
      const seconds = Math.round((replaced.retiresAt - Date.now()) / 1000)
      io.stdout.write(`previous kid ${replaced.kid} verifies until ${new Date(replaced.retiresAt).toISOString()} (in ${seconds} s), then retires\n`)
    }
  } finally {
    await store.close()
  }
}

export interface CliIo {
  stdin: NodeJS.ReadStream
  stdout: NodeJS.WriteStream
  stderr?: NodeJS.WritableStream
  env: NodeJS.ProcessEnv
}

export async function runCli (argv: string[], io: CliIo = { stdin: process.stdin, stdout: process.stdout, env: process.env }): Promise<void> {
  const [group, command, name] = argv
  if (group === undefined || group === 'help' || group === '--help' || group === '-h') {
    io.stdout.write(`${USAGE}\n`)
    return
  }
  if (group === '--version' || group === 'version') {
    io.stdout.write(`keygate ${keygateVersion()}\n`)
    return
  }
  if (!(COMMANDS as readonly string[]).includes(group)) {
    const near = closestCommand(group)
    throw new UsageError(`keygate: unknown command "${group}"${near === undefined ? '' : `; did you mean "${near}"?`} (keygate --help lists them)`)
  }
  if ((CLIENT_COMMANDS as readonly string[]).includes(group ?? '')) {
    return await runClientCommand(group as ClientCommand, argv.slice(1), {
      ...io,
      stderr: io.stderr ?? process.stderr,
      // the prompt goes to stderr: stdout carries the token or the answer
      readPassword: async () => await readPassword(io.stdin, process.stderr)
    }, USAGE)
  }
  if (group === 'serve' || group === 'demo') {
    throw new UsageError(`keygate ${group} takes no arguments: it is configured by its environment (see docs/configuration.md)`)
  }
  if (group === 'reload' || group === 'stop') {
    if (command !== undefined) throw new UsageError(`keygate ${group} takes no arguments: it finds the gateway by KEYGATE_PID_FILE`)
    const config = await loadConfig(io.env)
    if (config.pidFile === undefined) {
      throw new UsageError(`KEYGATE_PID_FILE is not set: keygate ${group} signals the gateway whose PID is in that file ` +
        '(the gateway writes it when started with the same variable; see docs/configuration.md)')
    }
    const { signalGateway } = await import('./signal-commands.js')
    return await signalGateway(group, config.pidFile, config.server.shutdownGraceMs, io.stdout)
  }
  if (group === 'routes' && command === 'check') {
    // one FILE, and --json at most once, in any order
    const args = argv.slice(2)
    const json = args.includes('--json')
    const [file, ...more] = args.filter((arg) => arg !== '--json')
    if (file !== undefined && more.length === 0 && args.length === 1 + Number(json)) return await checkRoutes(file, json, io)
  }
  if (group === 'tokens' && command === 'rotate' && name === undefined) return await rotateTokenKey(io)
  if (group === 'keys' || group === 'users') {
    const args = argv.slice(2)
    const { OperatorUsageError, checkOperatorArgs, runOperatorCommand } = await import('./operator.js')
    try {
      checkOperatorArgs(group, command, args)
      return await runOperatorCommand(group, command, args, {
        stdout: io.stdout,
        backend: await operatorBackend(io.env),
        readPassword: async () => await readPassword(io.stdin, io.stdout)
      })
    } catch (err) {
      throw err instanceof OperatorUsageError ? new UsageError(`${err.message}\n\n${USAGE}`) : err
    }
  }
  if (group === 'usage') {
    const { UsageCommandError, runUsageCommand } = await import('./usage-commands.js')
    try {
      await runUsageCommand(command, argv.slice(2), { stdout: io.stdout, source: async () => await usageSource(io.env) })
      return
    } catch (err) {
      throw err instanceof UsageCommandError ? new UsageError(`${err.message}\n\n${USAGE}`) : err
    }
  }
  throw new UsageError(USAGE)
}

/**
 * `keygate bench ...`: the load tool of `npm run bench` (the @keygate/bench dev package), in a
 * process of its own with the terminal passed through. Found as an installed package, so it is
 * there with the dev dependencies (npm ci) and absent from a production install.
 */
async function runBench (args: string[]): Promise<number> {
  let entry: string | undefined
  try {
    entry = fileURLToPath(import.meta.resolve('@keygate/bench/cli'))
  } catch {}
  // a production install may keep the workspace's link but not its files
  if (entry === undefined || !existsSync(entry)) {
    throw new Error('the load tool (@keygate/bench) is not installed: ' +
      'it comes with a checkout of keygate and its dev dependencies (npm ci), not with a production install')
  }
  const child = spawn(process.execPath, ['--conditions=keygate-source', '--import', import.meta.resolve('tsx'), entry, ...args], { stdio: 'inherit' })
  // Ctrl-C reaches the child through the terminal; the child cleans up and exits
  process.on('SIGINT', () => {})
  return await new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('exit', (code, signal) => { resolve(code ?? (signal === null ? 1 : 128 + (osConstants.signals[signal] ?? 0))) })
  })
}

const SERVERS: Record<string, () => Promise<void>> = {
  serve: async () => { await (await import('../process/serve.js')).serve() },
  demo: async () => { await (await import('../process/demo.js')).demo() }
}

/**
 * The command as a process runs it, with `args` (what follows `keygate`): `serve` and `demo` make
 * this process the gateway, which handles its own signals (process/signals.ts); `bench` runs the
 * load tool in a child; every other command runs and exits with its code (2 for a usage error).
 * Running this file calls it; so does bin/keygate.js, the package's command.
 */
export function main (args: string[] = process.argv.slice(2)): void {
  const [first] = args
  if (args.length === 1 && first !== undefined && Object.hasOwn(SERVERS, first)) {
    SERVERS[first]?.().catch(async (err: unknown) => { (await import('../process/signals.js')).exitWithStartupError(err) })
    return
  }
  if (first === 'bench') {
    runBench(args.slice(1)).then((code) => process.exit(code), (err: unknown) => {
      process.stderr.write(`keygate: ${(err as Error).message}\n`)
      process.exit(1)
    })
    return
  }
  // `keygate call ... | head`: the reader may leave before the answer is written
  endQuietlyOnClosedPipe()
  runCli(args).catch((err: unknown) => {
    // The request's answer is already printed; nothing to add.
    if (err instanceof RequestFailed) process.exit(1)
    const message = err instanceof UsageError || err instanceof ClientUsageError || err instanceof ConfigError
      ? err.message
      : err instanceof GatewayError ? `${err.code}: ${err.message}` : `keygate: ${(err as Error).message}`
    process.stderr.write(`${message}\n`)
    process.exit(err instanceof UsageError || err instanceof ClientUsageError ? 2 : 1)
  })
}

if (isMainModule(import.meta.url)) main()
