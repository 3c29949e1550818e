// The operator's `keys` and `users` commands (see keygate.ts for the usage text). They run the
// operations of admin/operations.ts, either on the Redis of the running gateways (direct: for
// bootstrapping, and where there is no admin API) or through a gateway's admin API
// (KEYGATE_ADMIN_URL and KEYGATE_ADMIN_TOKEN: cli/admin-client.ts), and print the same either way.
// What they change reaches every gateway without a restart (revocations are announced over Redis
// pub/sub, as when a user revokes over HTTP).
import { createOperations, type OperatorKey, type Operations } from '../admin/operations.js'
import type { GatewayConfig } from '../config/env.js'
import { createKeyRegistry } from '../keys/key-registry.js'
import { formatTable } from '../lib/table.js'
import { createStore } from '../store/index.js'
import { redisConnection } from '../store/index.js'
import { describeRedis } from '../store/redis-connection.js'
import { createUserService } from '../users/user-service.js'

export class OperatorUsageError extends Error {}

/** Where the commands act. */
export interface OperatorBackend {
  operations: Operations
  /** how messages name it: the Redis and prefix, or the admin API */
  where: string
  close: () => Promise<void>
}

export interface OperatorIo {
  stdout: NodeJS.WritableStream
  backend: OperatorBackend
  /** the new password, from a prompt without echo or from stdin */
  readPassword: () => Promise<string>
}

/** The operations on the store of `config` (the gateways' Redis). */
export async function directBackend (config: GatewayConfig): Promise<OperatorBackend> {
  const store = await createStore(config)
  // it serves no signed request: no key cache, and no need to hear of revocations
  const keys = createKeyRegistry(store, { cacheSize: 0, maxKeysPerOwner: config.maxKeysPerUser, watch: false })
  const connection = redisConnection(config)
  return {
    operations: createOperations({ users: createUserService(store), keys }),
    where: `${connection === undefined ? 'the embedded store' : describeRedis(connection)} (prefix ${config.redisPrefix})`,
    close: async () => {
      await keys.close()
      await store.close()
    }
  }
}

interface Flags { json: boolean; user: string | undefined; positional: string[] }

function parseFlags (args: string[], allowed: { user?: boolean }): Flags {
  const flags: Flags = { json: false, user: undefined, positional: [] }
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string
    if (arg === '--json') flags.json = true
    else if (allowed.user === true && arg === '--user' && args[i + 1] !== undefined) flags.user = args[++i]
    else if (allowed.user === true && arg.startsWith('--user=')) flags.user = arg.slice('--user='.length)
    else if (arg.startsWith('-')) throw new OperatorUsageError(`unknown option ${arg}`)
    else flags.positional.push(arg)
  }
  return flags
}

/** "2026-05-01T10:20:30.123Z" -> "2026-05-01 10:20:30Z"; "-" for none */
const when = (iso: string | null | undefined): string => iso === null || iso === undefined ? '-' : iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')

function keyRow (key: OperatorKey): string[] {
  return [key.apiKey, key.owner, key.name, key.status, when(key.createdAt), when(key.lastUsedAt), when(key.expiresAt)]
}

const KEY_HEADER = ['APIKEY', 'OWNER', 'NAME', 'STATUS', 'CREATED', 'LAST USED', 'EXPIRES']

async function keysCommand (command: string | undefined, args: string[], io: OperatorIo): Promise<void> {
  const { operations, where } = io.backend
  if (command === 'list') {
    const { json, user, positional } = parseFlags(args, { user: true })
    if (positional.length > 0) throw new OperatorUsageError('keys list takes no argument but --user NAME and --json')
    const records = await operations.listKeys(user)
    if (json) {
      io.stdout.write(JSON.stringify(records, null, 2) + '\n')
      return
    }
    io.stdout.write(formatTable([KEY_HEADER, ...records.map(keyRow)]))
    io.stdout.write(`${records.length} key${records.length === 1 ? '' : 's'}${user === undefined ? '' : ` of ${user}`}\n`)
    return
  }
  const { json, positional } = parseFlags(args, {})
  const apiKey = positional[0]
  if (apiKey === undefined || positional.length > 1) throw new OperatorUsageError(`keys ${command ?? ''} needs one APIKEY`)
  if (command === 'show') {
    const view = await operations.getKey(apiKey)
    if (view === null) throw new Error(`no key ${apiKey} in ${where}`)
    if (json) {
      io.stdout.write(JSON.stringify(view, null, 2) + '\n')
      return
    }
    const { publicKey, ...fields } = view
    const lines = Object.entries(fields).map(([field, value]) => [`${field}:`, String(value ?? '-')])
    io.stdout.write(formatTable(lines) + publicKey + (publicKey.endsWith('\n') ? '' : '\n'))
    return
  }
  if (command === 'revoke') {
    const revocation = await operations.revokeKey(apiKey)
    if (revocation === null) throw new Error(`no key ${apiKey} in ${where}`)
    const { key, alreadyRevoked } = revocation
    const what = `key ${apiKey} (${key.owner}, ${JSON.stringify(key.name)})`
    io.stdout.write(alreadyRevoked
      ? `${what} was already revoked at ${key.revokedAt ?? '?'}\n`
      : `${what} revoked; every gateway on ${where} refuses it within a second\n`)
    return
  }
  throw new OperatorUsageError(`unknown command: keys ${command ?? ''}`)
}

async function usersCommand (command: string | undefined, args: string[], io: OperatorIo): Promise<void> {
  const { operations, where } = io.backend
  const { json, positional } = parseFlags(args, {})
  if (command === 'list') {
    if (positional.length > 0) throw new OperatorUsageError('users list takes no argument but --json')
    const rows = await operations.listUsers()
    if (json) {
      io.stdout.write(JSON.stringify(rows, null, 2) + '\n')
      return
    }
    io.stdout.write(formatTable([['USERNAME', 'CREATED', 'PASSWORD CHANGED', 'ACTIVE KEYS', 'KEYS'],
      ...rows.map((r) => [r.username, when(r.createdAt), when(r.updatedAt), String(r.activeKeys), String(r.keys)])]))
    io.stdout.write(`${rows.length} user${rows.length === 1 ? '' : 's'}\n`)
    return
  }
  const name = positional[0]
  if (name === undefined || positional.length > 1 || json) throw new OperatorUsageError(`users ${command ?? ''} needs one NAME`)
  if (command === 'add') {
    const password = await io.readPassword()
    const { created } = await operations.putUser(name, { password })
    io.stdout.write(`user ${name} ${created ? 'created' : 'updated'} in ${where}\n`)
    return
  }
  if (command === 'passwd') {
    if (await operations.getUser(name) === null) throw new Error(`no user ${name} in ${where}; create it with: users add ${name}`)
    const password = await io.readPassword()
    await operations.putUser(name, { password })
    io.stdout.write(`password of ${name} changed in ${where}; tokens already issued stay valid until they expire\n`)
    return
  }
  if (command === 'remove') {
    const removal = await operations.removeUser(name)
    if (removal === null) throw new Error(`no user ${name} in ${where}`)
    const { revokedKeys } = removal
    io.stdout.write(`user ${name} removed from ${where}; ${revokedKeys.length} key${revokedKeys.length === 1 ? '' : 's'} revoked ` +
      `(every gateway refuses ${revokedKeys.length === 1 ? 'it' : 'them'} within a second)\n`)
    io.stdout.write(`bearer tokens already issued to ${name} sign nothing and register nothing, ` +
      'but pass bearer-only routes until they expire (KEYGATE_TOKEN_TTL_SECONDS)\n')
    return
  }
  throw new OperatorUsageError(`unknown command: users ${command ?? ''}`)
}

/** each command: its positional arguments, and whether it takes --user */
const COMMANDS: Record<'keys' | 'users', Record<string, { args: number; user?: boolean }>> = {
  keys: { list: { args: 0, user: true }, show: { args: 1 }, revoke: { args: 1 } },
  users: { list: { args: 0 }, add: { args: 1 }, passwd: { args: 1 }, remove: { args: 1 } }
}

/** Throws OperatorUsageError for a command or arguments that are not one of COMMANDS. */
export function checkOperatorArgs (group: 'keys' | 'users', command: string | undefined, args: string[]): void {
  const shape = command === undefined ? undefined : COMMANDS[group][command]
  if (shape === undefined) throw new OperatorUsageError(`unknown command: ${group} ${command ?? ''}`.trimEnd())
  const { positional } = parseFlags(args, shape)
  if (positional.length !== shape.args) throw new OperatorUsageError(`${group} ${command ?? ''} takes ${shape.args === 0 ? 'no argument' : 'one argument'}`)
}

/** `keys list|show|revoke ...` and `users list|add|passwd|remove ...` on `io.backend`, which is closed afterwards. */
export async function runOperatorCommand (group: 'keys' | 'users', command: string | undefined, args: string[], io: OperatorIo): Promise<void> {
  try {
    checkOperatorArgs(group, command, args)
    if (group === 'keys') await keysCommand(command, args, io)
    else await usersCommand(command, args, io)
  } finally {
    await io.backend.close()
  }
}
