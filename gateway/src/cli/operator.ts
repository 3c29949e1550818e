// The operator's `keys` and `users` commands (see keygate.ts for the usage text). They run the
// operations of admin/operations.ts, either on the Redis of the running gateways (direct: for
// bootstrapping, and where there is no admin API) or through a gateway's admin API
// (KEYGATE_ADMIN_URL and KEYGATE_ADMIN_TOKEN: cli/admin-client.ts), and print the same either way.
// What they change reaches every gateway without a restart (revocations, key changes and scope
// changes are announced over Redis pub/sub, as when a user revokes over HTTP).
import { createOperations, type KeyChanges, type OperatorKey, type Operations } from '../admin/operations.js'
import type { GatewayConfig } from '../config/env.js'
import { createKeyRegistry, keyPolicy } from '../keys/key-registry.js'
import { MAX_PAGE_LIMIT, PAGE_LIMIT_DIGITS, type Page, type PageRequest } from '../lib/paging.js'
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
  const keys = createKeyRegistry(store, { cacheSize: 0, ...keyPolicy(config), watch: false })
  const connection = redisConnection(config)
  return {
    operations: createOperations({ users: createUserService(store, { scryptLogN: config.passwordScryptLogN }), keys }),
    where: `${connection === undefined ? 'the embedded store' : describeRedis(connection)} (prefix ${config.redisPrefix})`,
    close: async () => {
      await keys.close()
      await store.close()
    }
  }
}

/** the options with a value, by flag */
const VALUE_OPTIONS = { user: '--user', scopes: '--scopes', expiresAt: '--expires-at', limit: '--limit', cursor: '--cursor' } as const
type ValueOption = keyof typeof VALUE_OPTIONS
/** the switches, by flag */
const SWITCHES = { none: '--none', noScopes: '--no-scopes' } as const
type Switch = keyof typeof SWITCHES

/** What a command takes besides --json: how many positional arguments (`more`: or more), which options. */
interface CommandShape extends Partial<Record<ValueOption | Switch, boolean>> {
  args: number
  more?: boolean
}

type Flags = { json: boolean; positional: string[] } & Partial<Record<ValueOption, string>> & Record<Switch, boolean>

function parseFlags (args: string[], allowed: Partial<CommandShape>): Flags {
  const flags: Flags = { json: false, none: false, noScopes: false, positional: [] }
  const values = (Object.entries(VALUE_OPTIONS) as Array<[ValueOption, string]>).filter(([option]) => allowed[option] === true)
  const switches = (Object.entries(SWITCHES) as Array<[Switch, string]>).filter(([option]) => allowed[option] === true)
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string
    const next = args[i + 1]
    const spaced = values.find(([, flag]) => arg === flag && next !== undefined)
    const joined = values.find(([, flag]) => arg.startsWith(`${flag}=`))
    const switched = switches.find(([, flag]) => arg === flag)
    if (arg === '--json') flags.json = true
    else if (spaced !== undefined) flags[spaced[0]] = args[++i]
    else if (joined !== undefined) flags[joined[0]] = arg.slice(joined[1].length + 1)
    else if (switched !== undefined) flags[switched[0]] = true
    else if (arg.startsWith('-')) throw new OperatorUsageError(`unknown option ${arg}`)
    else flags.positional.push(arg)
  }
  return flags
}

/** ["a,b", "c"] -> [a, b, c]: no scope holds a comma (a space is left in, for the scope rule to refuse) */
export function splitScopes (values: string[]): string[] {
  return values.flatMap((value) => value.split(',')).filter((scope) => scope !== '')
}

/** A user's scopes as a person reads them */
const userScopes = (scopes: readonly string[]): string => scopes.length === 0 ? 'none' : scopes.join(' ')

/** A key's scopes as a person reads them: "-" for none, "(user's)" for a key from before scopes (it has every scope of its user). */
const keyScopes = (scopes: readonly string[] | null | undefined): string =>
  scopes === null || scopes === undefined ? "(user's)" : scopes.length === 0 ? '-' : scopes.join(' ')

/** "2026-05-01T10:20:30.123Z" -> "2026-05-01 10:20:30Z"; "-" for none */
const when = (iso: string | null | undefined): string => iso === null || iso === undefined ? '-' : iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z')

function keyRow (key: OperatorKey): string[] {
  return [key.apiKey, key.owner, key.name, key.status, when(key.createdAt), when(key.lastUsedAt), when(key.expiresAt), keyScopes(key.scopes)]
}

const KEY_HEADER = ['APIKEY', 'OWNER', 'NAME', 'STATUS', 'CREATED', 'LAST USED', 'EXPIRES', 'SCOPES']

/** `keys update`'s options as the changes to make: --scopes A,B or --no-scopes; --expires-at ISO or never */
function keyChanges (flags: Flags): KeyChanges {
  if (flags.scopes !== undefined && flags.noScopes) throw new OperatorUsageError('keys update: give --scopes A,B or --no-scopes, not both')
  const changes: KeyChanges = {
    ...(flags.scopes !== undefined && { scopes: splitScopes([flags.scopes]) }),
    ...(flags.noScopes && { scopes: [] }),
    ...(flags.expiresAt !== undefined && { expiresAt: flags.expiresAt === 'never' ? null : flags.expiresAt })
  }
  if (Object.keys(changes).length === 0) throw new OperatorUsageError('keys update needs --scopes A,B, --no-scopes or --expires-at ISO|never')
  return changes
}

const LIMIT_DIGITS = new RegExp(PAGE_LIMIT_DIGITS)

/** --limit N and --cursor C as a page request; undefined when neither is given (then the command lists everything) */
function pageRequest (flags: Flags): PageRequest | undefined {
  if (flags.limit === undefined && flags.cursor === undefined) return undefined
  if (flags.limit !== undefined && !LIMIT_DIGITS.test(flags.limit)) throw new OperatorUsageError(`--limit takes a number from 1 to ${MAX_PAGE_LIMIT}`)
  return { ...(flags.limit !== undefined && { limit: Number(flags.limit) }), ...(flags.cursor !== undefined && { cursor: flags.cursor }) }
}

/** Every page of a list, the largest pages the API gives, in order. */
async function allPages<T> (list: (page: PageRequest) => Promise<Page<T>>): Promise<T[]> {
  const items: T[] = []
  let cursor: string | null = null
  do {
    const page: Page<T> = await list({ limit: MAX_PAGE_LIMIT, ...(cursor !== null && { cursor }) })
    items.push(...page.items)
    cursor = page.nextCursor
  } while (cursor !== null)
  return items
}

/**
 * A list command's output: with --limit or --cursor one page (JSON: `{ items, next_cursor }`; a
 * table: then how to ask for the next page), else every item (JSON: the array, as before paging).
 */
async function writeList<T> (io: OperatorIo, flags: Flags, list: (page: PageRequest) => Promise<Page<T>>, table: (items: T[]) => string,
  count: (n: number) => string, command: string): Promise<void> {
  const request = pageRequest(flags)
  const page: Page<T> = request === undefined ? { items: await allPages(list), nextCursor: null } : await list(request)
  if (flags.json) {
    io.stdout.write(JSON.stringify(request === undefined ? page.items : { items: page.items, next_cursor: page.nextCursor }, null, 2) + '\n')
    return
  }
  io.stdout.write(table(page.items))
  io.stdout.write(count(page.items.length) + '\n')
  if (page.nextCursor !== null) io.stdout.write(`more: ${command} --cursor ${page.nextCursor}${flags.limit === undefined ? '' : ` --limit ${flags.limit}`}\n`)
}

async function keysCommand (command: string | undefined, args: string[], io: OperatorIo): Promise<void> {
  const { operations, where } = io.backend
  if (command === 'list') {
    const flags = parseFlags(args, COMMANDS.keys.list)
    const { user, positional } = flags
    if (positional.length > 0) throw new OperatorUsageError('keys list takes no argument but --user NAME, --limit N, --cursor C and --json')
    await writeList(io, flags, async (page) => await operations.listKeys(user, page), (records) => formatTable([KEY_HEADER, ...records.map(keyRow)]),
      (n) => `${n} key${n === 1 ? '' : 's'}${user === undefined ? '' : ` of ${user}`}`, `keys list${user === undefined ? '' : ` --user ${user}`}`)
    return
  }
  const flags = parseFlags(args, command === 'update' ? COMMANDS.keys.update : {})
  const { json, positional } = flags
  const apiKey = positional[0]
  if (apiKey === undefined || positional.length > 1) throw new OperatorUsageError(`keys ${command ?? ''} needs one APIKEY`)
  if (command === 'show') {
    const view = await operations.getKey(apiKey)
    if (view === null) throw new Error(`no key ${apiKey} in ${where}`)
    if (json) {
      io.stdout.write(JSON.stringify(view, null, 2) + '\n')
      return
    }
    const { publicKey, scopes, ...fields } = view
    const lines = [...Object.entries(fields).map(([field, value]) => [`${field}:`, String(value ?? '-')]), ['scopes:', keyScopes(scopes)]]
    // a tombstone (a revoked key past its retention) keeps no public key
    const pem = publicKey ?? '(public key pruned: the key was revoked and is kept as a tombstone)\n'
    io.stdout.write(formatTable(lines) + pem + (pem.endsWith('\n') ? '' : '\n'))
    return
  }
  if (command === 'update') {
    const change = await operations.updateKey(apiKey, keyChanges(flags))
    if (change === null) throw new Error(`no key ${apiKey} in ${where}`)
    const { key } = change
    const what = `key ${apiKey} (${key.owner}, ${JSON.stringify(key.name)})`
    if (change.outcome !== 'updated') throw new Error(`${what} is ${change.outcome}: it can never sign again, so it was left as it is`)
    io.stdout.write(`${what} updated: scopes ${keyScopes(key.scopes)}, expires ${when(key.expiresAt)}; ` +
      `every gateway on ${where} applies it within a second\n`)
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

/** `users scopes NAME [SCOPE ...]`: replaces the user's scopes; without any, shows them (`--none` takes them all). */
async function userScopesCommand (args: string[], io: OperatorIo): Promise<void> {
  const { operations, where } = io.backend
  const { none, positional } = parseFlags(args, COMMANDS.users.scopes)
  const [name, ...given] = positional as [string, ...string[]]
  const user = await operations.getUser(name)
  if (user === null) throw new Error(`no user ${name} in ${where}; create it with: users add ${name} --scopes ...`)
  if (given.length === 0 && !none) {
    io.stdout.write(`scopes of ${name}: ${userScopes(user.scopes)}\n`)
    return
  }
  if (given.length > 0 && none) throw new OperatorUsageError('users scopes: give scopes or --none, not both')
  const { user: updated } = await operations.putUser(name, { scopes: none ? [] : splitScopes(given) })
  io.stdout.write(`scopes of ${name} set to ${userScopes(updated.scopes)} (were: ${userScopes(user.scopes)}) in ${where}\n`)
  io.stdout.write(`every gateway on it applies them within a second, to ${name}'s bearer tokens and to every key of ${name}'s ` +
    '(a key may use only the scopes its user still has)\n')
}

async function usersCommand (command: string | undefined, args: string[], io: OperatorIo): Promise<void> {
  if (command === 'scopes') return await userScopesCommand(args, io)
  const { operations, where } = io.backend
  const flags = parseFlags(args, command === 'add' ? COMMANDS.users.add : command === 'list' ? COMMANDS.users.list : {})
  const { json, positional, scopes } = flags
  if (command === 'list') {
    if (positional.length > 0) throw new OperatorUsageError('users list takes no argument but --limit N, --cursor C and --json')
    const header = ['USERNAME', 'CREATED', 'PASSWORD CHANGED', 'ACTIVE KEYS', 'KEYS', 'SCOPES']
    await writeList(io, flags, async (page) => await operations.listUsers(page), (rows) => formatTable([header,
      ...rows.map((r) => [r.username, when(r.createdAt), when(r.updatedAt), String(r.activeKeys), String(r.keys), keyScopes(r.scopes)])]),
    (n) => `${n} user${n === 1 ? '' : 's'}`, 'users list')
    return
  }
  const name = positional[0]
  if (name === undefined || positional.length > 1 || json) throw new OperatorUsageError(`users ${command ?? ''} needs one NAME`)
  if (command === 'add') {
    const password = await io.readPassword()
    const { created, user } = await operations.putUser(name, { password, ...(scopes !== undefined && { scopes: splitScopes([scopes]) }) })
    const granted = scopes === undefined ? '' : `, scopes: ${userScopes(user.scopes)}`
    io.stdout.write(`user ${name} ${created ? 'created' : 'updated'} in ${where}${granted}\n`)
    return
  }
  if (command === 'passwd') {
    if (await operations.getUser(name) === null) throw new Error(`no user ${name} in ${where}; create it with: users add ${name}`)
    const password = await io.readPassword()
    await operations.putUser(name, { password })
    io.stdout.write(`password of ${name} changed in ${where}; every gateway on it refuses the tokens issued before within a second\n`)
    return
  }
  if (command === 'remove') {
    const removal = await operations.removeUser(name)
    if (removal === null) throw new Error(`no user ${name} in ${where}`)
    const { revokedKeys } = removal
    io.stdout.write(`user ${name} removed from ${where}; ${revokedKeys.length} key${revokedKeys.length === 1 ? '' : 's'} revoked ` +
      `(every gateway refuses ${revokedKeys.length === 1 ? 'it' : 'them'} within a second)\n`)
    io.stdout.write(`bearer tokens already issued to ${name} are refused everywhere, also once a user named ${name} is created again\n`)
    return
  }
  throw new OperatorUsageError(`unknown command: users ${command ?? ''}`)
}

/** each command: its positional arguments and its options */
const COMMANDS = {
  keys: {
    list: { args: 0, user: true, limit: true, cursor: true },
    show: { args: 1 },
    update: { args: 1, scopes: true, noScopes: true, expiresAt: true },
    revoke: { args: 1 }
  },
  users: {
    list: { args: 0, limit: true, cursor: true },
    add: { args: 1, scopes: true },
    passwd: { args: 1 },
    remove: { args: 1 },
    scopes: { args: 1, more: true, none: true }
  }
} satisfies Record<'keys' | 'users', Record<string, CommandShape>>

/** Throws OperatorUsageError for a command or arguments that are not one of COMMANDS. */
export function checkOperatorArgs (group: 'keys' | 'users', command: string | undefined, args: string[]): void {
  const shapes: Record<string, CommandShape> = COMMANDS[group]
  const shape = command === undefined || !Object.hasOwn(shapes, command) ? undefined : shapes[command]
  if (shape === undefined) throw new OperatorUsageError(`unknown command: ${group} ${command ?? ''}`.trimEnd())
  const { positional } = parseFlags(args, shape)
  if (shape.more === true ? positional.length < shape.args : positional.length !== shape.args) {
    const takes = shape.args === 0 ? 'no argument' : shape.more === true ? 'one argument or more' : 'one argument'
    throw new OperatorUsageError(`${group} ${command ?? ''} takes ${takes}`)
  }
}

/** `keys list|show|update|revoke ...` and `users list|add|passwd|remove|scopes ...` on `io.backend`, which is closed afterwards. */
export async function runOperatorCommand (group: 'keys' | 'users', command: string | undefined, args: string[], io: OperatorIo): Promise<void> {
  try {
    checkOperatorArgs(group, command, args)
    if (group === 'keys') await keysCommand(command, args, io)
    else await usersCommand(command, args, io)
  } finally {
    await io.backend.close()
  }
}
