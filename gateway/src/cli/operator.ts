// The operator's `keys` and `users` commands (see keygate.ts for the usage text): they work on the
// Redis of the running gateways, and what they change reaches every gateway without a restart
// (revocations and scope changes are announced over Redis pub/sub, as when a user revokes over HTTP).
import type { GatewayConfig } from '../config/env.js'
import { keyStatus, type KeyStatus } from '../keys/key-registry.js'
import { keyView } from '../keys/key-view.js'
import { formatTable } from '../lib/table.js'
import { createStore, type KeyRecord, type Store } from '../store/index.js'
import { redisConnection } from '../store/index.js'
import { describeRedis } from '../store/redis-connection.js'
import { createUserService } from '../users/user-service.js'

export class OperatorUsageError extends Error {}

export interface OperatorIo {
  stdout: NodeJS.WritableStream
  config: GatewayConfig
  /** the new password, from a prompt without echo or from stdin */
  readPassword: () => Promise<string>
}

interface Flags { json: boolean; user: string | undefined; none: boolean; positional: string[] }

function parseFlags (args: string[], allowed: { user?: boolean; none?: boolean }): Flags {
  const flags: Flags = { json: false, user: undefined, none: false, positional: [] }
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string
    if (arg === '--json') flags.json = true
    else if (allowed.none === true && arg === '--none') flags.none = true
    else if (allowed.user === true && arg === '--user' && args[i + 1] !== undefined) flags.user = args[++i]
    else if (allowed.user === true && arg.startsWith('--user=')) flags.user = arg.slice('--user='.length)
    else if (arg.startsWith('-')) throw new OperatorUsageError(`unknown option ${arg}`)
    else flags.positional.push(arg)
  }
  return flags
}

/** "2026-05-01T10:20:30.123Z" -> "2026-05-01 10:20:30Z"; "-" for none */
const when = (iso: string | null | undefined): string => iso === null || iso === undefined ? '-' : iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')

/** A key's scopes as a person reads them: "-" for none, "(user's)" for a key from before scopes (it has every scope of its user). */
const keyScopes = (scopes: string[] | undefined): string => scopes === undefined ? "(user's)" : scopes.length === 0 ? '-' : scopes.join(' ')

/** ["a,b", "c"] -> [a, b, c]: no scope holds a comma (a space is left in, for the scope rule to refuse) */
export function splitScopes (values: string[]): string[] {
  return values.flatMap((value) => value.split(',')).filter((scope) => scope !== '')
}

function keyRow (record: KeyRecord & { status: KeyStatus }): string[] {
  return [record.apiKey, record.owner, record.name, record.status, when(record.createdAt), when(record.lastUsedAt), when(record.expiresAt),
    keyScopes(record.scopes)]
}

const KEY_HEADER = ['APIKEY', 'OWNER', 'NAME', 'STATUS', 'CREATED', 'LAST USED', 'EXPIRES', 'SCOPES']
const withStatus = (record: KeyRecord): KeyRecord & { status: KeyStatus } => ({ ...record, status: keyStatus(record, Date.now()) })
const where = (config: OperatorIo['config']): string => {
  const connection = redisConnection(config)
  return `${connection === undefined ? 'the embedded store' : describeRedis(connection)} (prefix ${config.redisPrefix})`
}

async function keysCommand (store: Store, command: string | undefined, args: string[], io: OperatorIo): Promise<void> {
  if (command === 'list') {
    const { json, user, positional } = parseFlags(args, { user: true })
    if (positional.length > 0) throw new OperatorUsageError('keys list takes no argument but --user NAME and --json')
    const records = (await store.listKeys(user)).map(withStatus)
    if (json) {
      io.stdout.write(JSON.stringify(records.map((r) => ({ owner: r.owner, ...keyView(r) })), null, 2) + '\n')
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
    const record = await store.getKey(apiKey)
    if (record === null) throw new Error(`no key ${apiKey} in ${where(io.config)}`)
    const view = { owner: record.owner, ...keyView(withStatus(record)), publicKey: record.publicKey }
    if (json) {
      io.stdout.write(JSON.stringify(view, null, 2) + '\n')
      return
    }
    const { publicKey, ...fields } = view
    const lines = Object.entries(fields).map(([field, value]) => [`${field}:`, field === 'scopes' ? keyScopes(record.scopes) : String(value ?? '-')])
    io.stdout.write(formatTable(lines) + publicKey + (publicKey.endsWith('\n') ? '' : '\n'))
    return
  }
  if (command === 'revoke') {
    const { outcome, record } = await store.revokeKey(apiKey, new Date().toISOString())
    if (outcome === 'not-found' || record === null) throw new Error(`no key ${apiKey} in ${where(io.config)}`)
    const what = `key ${apiKey} (${record.owner}, ${JSON.stringify(record.name)})`
    io.stdout.write(outcome === 'revoked'
      ? `${what} revoked; every gateway on ${where(io.config)} refuses it within a second\n`
      : `${what} was already revoked at ${record.revokedAt ?? '?'}\n`)
    return
  }
  throw new OperatorUsageError(`unknown command: keys ${command ?? ''}`)
}

/** `users scopes NAME [SCOPE ...]`: replaces the user's scopes; without any, shows them (`--none` takes them all). */
async function userScopesCommand (store: Store, args: string[], io: OperatorIo): Promise<void> {
  const { none, positional } = parseFlags(args, { none: true })
  const [name, ...given] = positional as [string, ...string[]]
  const user = await store.getUser(name)
  if (user === null) throw new Error(`no user ${name} in ${where(io.config)}; create it with: users add ${name} --scopes ...`)
  const shown = (scopes: string[]): string => scopes.length === 0 ? 'none' : scopes.join(' ')
  if (given.length === 0 && !none) {
    io.stdout.write(`scopes of ${name}: ${shown(user.scopes)}\n`)
    return
  }
  if (given.length > 0 && none) throw new OperatorUsageError('users scopes: give scopes or --none, not both')
  const updated = await createUserService(store).setScopes(name, splitScopes(given))
  if (updated === null) throw new Error(`no user ${name} in ${where(io.config)}`)
  io.stdout.write(`scopes of ${name} set to ${shown(updated.scopes)} (were: ${shown(user.scopes)}) in ${where(io.config)}\n`)
  io.stdout.write(`every gateway on it applies them within a second, to ${name}'s bearer tokens and to every key of ${name}'s ` +
    '(a key may use only the scopes its user still has)\n')
}

async function usersCommand (store: Store, command: string | undefined, args: string[], io: OperatorIo): Promise<void> {
  if (command === 'scopes') return await userScopesCommand(store, args, io)
  const { json, positional } = parseFlags(args, {})
  if (command === 'list') {
    if (positional.length > 0) throw new OperatorUsageError('users list takes no argument but --json')
    const users = await store.listUsers()
    const rows = await Promise.all(users.map(async (user) => {
      const keys = (await store.listKeys(user.username)).map(withStatus)
      return {
        username: user.username,
        createdAt: user.createdAt,
        updatedAt: user.updatedAt,
        activeKeys: keys.filter((k) => k.status === 'active').length,
        keys: keys.length,
        scopes: user.scopes
      }
    }))
    if (json) {
      io.stdout.write(JSON.stringify(rows, null, 2) + '\n')
      return
    }
    io.stdout.write(formatTable([['USERNAME', 'CREATED', 'PASSWORD CHANGED', 'ACTIVE KEYS', 'KEYS', 'SCOPES'],
      ...rows.map((r) => [r.username, when(r.createdAt), when(r.updatedAt), String(r.activeKeys), String(r.keys), r.scopes.join(' ') || '-'])]))
    io.stdout.write(`${rows.length} user${rows.length === 1 ? '' : 's'}\n`)
    return
  }
  const name = positional[0]
  if (name === undefined || positional.length > 1 || json) throw new OperatorUsageError(`users ${command ?? ''} needs one NAME`)
  if (command === 'passwd') {
    if (await store.getUser(name) === null) throw new Error(`no user ${name} in ${where(io.config)}; create it with: users add ${name}`)
    const password = await io.readPassword()
    await createUserService(store).upsert(name, password)
    io.stdout.write(`password of ${name} changed in ${where(io.config)}; tokens already issued stay valid until they expire\n`)
    return
  }
  if (command === 'remove') {
    const { removed, revokedKeys } = await store.removeUser(name)
    if (!removed) throw new Error(`no user ${name} in ${where(io.config)}`)
    io.stdout.write(`user ${name} removed from ${where(io.config)}; ${revokedKeys.length} key${revokedKeys.length === 1 ? '' : 's'} revoked ` +
      `(every gateway refuses ${revokedKeys.length === 1 ? 'it' : 'them'} within a second)\n`)
    io.stdout.write(`bearer tokens already issued to ${name} sign nothing and register nothing, ` +
      'but pass bearer-only routes until they expire (KEYGATE_TOKEN_TTL_SECONDS)\n')
    return
  }
  throw new OperatorUsageError(`unknown command: users ${command ?? ''}`)
}

/** each command: its positional arguments (`more`: and any number after them), and whether it takes --user or --none */
const COMMANDS: Record<'keys' | 'users', Record<string, { args: number; more?: boolean; user?: boolean; none?: boolean }>> = {
  keys: { list: { args: 0, user: true }, show: { args: 1 }, revoke: { args: 1 } },
  users: { list: { args: 0 }, passwd: { args: 1 }, remove: { args: 1 }, scopes: { args: 1, more: true, none: true } }
}

/** Throws OperatorUsageError for a command or arguments that are not one of COMMANDS. */
export function checkOperatorArgs (group: 'keys' | 'users', command: string | undefined, args: string[]): void {
  const shape = command === undefined ? undefined : COMMANDS[group][command]
  if (shape === undefined) throw new OperatorUsageError(`unknown command: ${group} ${command ?? ''}`.trimEnd())
  const { positional } = parseFlags(args, shape)
  if (shape.more === true ? positional.length < shape.args : positional.length !== shape.args) {
    const takes = shape.args === 0 ? 'no argument' : shape.more === true ? 'a NAME and scopes' : 'one argument'
    throw new OperatorUsageError(`${group} ${command ?? ''} takes ${takes}`)
  }
}

/** `keys list|show|revoke ...` and `users list|passwd|remove|scopes ...` on the store of `io.config`. */
export async function runOperatorCommand (group: 'keys' | 'users', command: string | undefined, args: string[], io: OperatorIo): Promise<void> {
  checkOperatorArgs(group, command, args)
  const store = await createStore(io.config)
  try {
    if (group === 'keys') await keysCommand(store, command, args, io)
    else await usersCommand(store, command, args, io)
  } finally {
    await store.close()
  }
}
