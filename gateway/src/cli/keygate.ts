// `npm run keygate -- <command>`: operator commands.
//   users add NAME     create NAME, or set its password (read from stdin), on the gateways' Redis
//   routes check FILE  validate a route file and print the table of routes it makes
//   tokens rotate      make a new token-signing key current for every gateway on that Redis
import { createInterface } from 'node:readline'
import { ConfigError, loadConfig } from '../config.js'
import { GatewayError } from '../errors.js'
import { isMainModule } from '../server.js'
import type { RouteConfig } from '../config.js'
import { loadRouteFile } from '../routing/route-file.js'
import { createStore, redisConnection } from '../store/index.js'
import { describeRedis, type RedisConnection } from '../store/redis-connection.js'
import { DEFAULT_RETIRE_MARGIN_MS, retireAfterMs, rotateStoredSigningKey } from '../tokens/signing-key-ring.js'
import { createUserService } from '../users/user-service.js'

const USAGE = `usage: npm run keygate -- users add NAME
       npm run keygate -- routes check FILE
       npm run keygate -- tokens rotate

  users add NAME     create user NAME, or change its password (read from stdin:
                     typed at a prompt, or piped: printf %s "$PASSWORD" | npm run keygate -- users add NAME)
  routes check FILE  validate a route file (YAML or JSON) and print the routes it makes
  tokens rotate      generate a new token-signing key and make it current; the replaced key keeps
                     verifying until every token it signed has expired (the longest token lifetime
                     of KEYGATE_TOKEN_TTL_SECONDS and the identity tokens of KEYGATE_ROUTES, plus
                     a margin), then retires. Running gateways pick it up without a restart.

users add and tokens rotate work on the Redis named by REDIS_URL, KEYGATE_REDIS_SENTINELS or
KEYGATE_REDIS_CLUSTER_NODES (and KEYGATE_REDIS_PREFIX), the store of the running gateways: run them
with the gateways' environment. Without any of them there is
nothing to change: the embedded store lives inside a gateway process; use KEYGATE_BOOTSTRAP_USERS
there instead, and restart to get a new signing key.`

export class UsageError extends Error {}

/** The gateways' Redis, which the store-changing commands need. */
function requireRedis (config: ReturnType<typeof loadConfig>): RedisConnection {
  const connection = redisConnection(config)
  if (connection === undefined) throw new UsageError(`REDIS_URL is not set (nor KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES).\n\n${USAGE}`)
  return connection
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
      r.auth + (r.identityToken ? '+identity-token' : ''),
      r.upstream,
      r.rewrite === undefined ? '(unchanged)' : (r.exact ? r.rewrite : `${r.rewrite}*`),
      `${r.timeoutMs} ms`,
      `${r.bodyLimit} B`,
      r.name
    ])
  }
  const widths = rows[0]!.map((_, col) => Math.max(...rows.map((row) => row[col]!.length)))
  return rows.map((row) => row.map((cell, col) => cell.padEnd(widths[col]!)).join('  ').trimEnd()).join('\n') + '\n'
}

async function checkRoutes (file: string, io: { stdout: NodeJS.WritableStream, env: NodeJS.ProcessEnv }): Promise<void> {
  const routes = await loadRouteFile(file, loadConfig(io.env).routeDefaults)
  io.stdout.write(formatRouteTable(routes))
  io.stdout.write(`${file}: ${routes.length} route${routes.length === 1 ? '' : 's'}, valid\n`)
}

/** Rotates the signing key on the gateways' Redis; prints the new kid and when the old key retires. */
async function rotateTokenKey (io: { stdout: NodeJS.WritableStream, env: NodeJS.ProcessEnv }): Promise<void> {
  const config = loadConfig(io.env)
  const redis = requireRedis(config)
  if (config.jwt.keyFile !== undefined) {
    throw new Error('KEYGATE_JWT_KEY_FILE is set: the gateways sign with that file\'s key, not with the key ring on Redis; rotate it by restarting them with a new key file')
  }
  // The replaced key must outlive every token it signed: bearer tokens and identity tokens alike.
  const routes = config.routesFile === undefined ? config.routes : await loadRouteFile(config.routesFile, config.routeDefaults)
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

export async function runCli (argv: string[], io = { stdin: process.stdin, stdout: process.stdout, env: process.env }): Promise<void> {
  const [group, command, name, ...rest] = argv
  if (group === 'routes' && command === 'check' && name !== undefined && rest.length === 0) return await checkRoutes(name, io)
  if (group === 'tokens' && command === 'rotate' && name === undefined) return await rotateTokenKey(io)
  if (group !== 'users' || command !== 'add' || name === undefined || rest.length > 0) throw new UsageError(USAGE)
  const config = loadConfig(io.env)
  const redis = requireRedis(config)
  const store = await createStore(config)
  try {
    const password = await readPassword(io.stdin, io.stdout)
    const user = await createUserService(store).upsert(name, password)
    const verb = user.createdAt === user.updatedAt ? 'created' : 'updated'
    io.stdout.write(`user ${name} ${verb} in ${describeRedis(redis)} (prefix ${config.redisPrefix})\n`)
  } finally {
    await store.close()
  }
}

if (isMainModule(import.meta.url)) {
  runCli(process.argv.slice(2)).catch((err: unknown) => {
    const message = err instanceof UsageError || err instanceof ConfigError ? err.message
      : err instanceof GatewayError ? `${err.code}: ${err.message}` : `keygate: ${(err as Error).message}`
    process.stderr.write(`${message}\n`)
    process.exit(err instanceof UsageError ? 2 : 1)
  })
}
