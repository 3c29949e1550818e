// Users on Redis: one hash per user and the set of their names, in the registry's hash slot
// (key-names.ts). Every change of a user is announced on the key-events channel in the same step
// (key-events.ts). Removing a user also revokes its keys in that step: it touches the key records
// and the indexes keys.ts keeps, named from the owner's index.
import { newUserId, storedScopes, type UserRecord, type UserStore } from '../types.js'
import { results, type RedisStoreContext } from './context.js'
import { keyEventMessage } from './key-events.js'

// Removing a user: revoke (and announce) every key in its index, drop the index, the user and its
// name in the users set, in one step; a registration can never slip between. The key records are
// named from the index (key-record prefix .. apiKey): undeclared keys, which a single Redis allows
// and a cluster too, since every registry key shares one hash slot (redisKeyNames).
// The user's removal is announced too (ARGV[5], a user-changed message: keyEventMessage).
// KEYS: user hash, users set, owner index, revoked-keys index. ARGV: revokedAt, key-record prefix,
// channel, username, user-changed message, revokedAt (ms).
const REMOVE_USER_SCRIPT = `
local revoked = {}
for _, apiKey in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  local name = ARGV[2] .. apiKey
  local text = redis.call('GET', name)
  if text then
    local record = cjson.decode(text)
    if not record.revokedAt then
      record.revokedAt = ARGV[1]
      redis.call('SET', name, cjson.encode(record))
      redis.call('ZADD', KEYS[4], ARGV[6], apiKey)
      redis.call('PUBLISH', ARGV[3], apiKey)
      table.insert(revoked, apiKey)
    end
  end
end
redis.call('DEL', KEYS[3])
local removed = redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], ARGV[4])
if removed == 1 then redis.call('PUBLISH', ARGV[3], ARGV[5]) end
return {removed, revoked}`

// A user's scopes replaced and announced in one step; nothing for a user that does not exist.
// KEYS: user hash. ARGV: scopes JSON, channel, user-changed message. Returns the user's fields.
const SET_USER_SCOPES_SCRIPT = `
if redis.call('HEXISTS', KEYS[1], 'passwordHash') == 0 then return false end
redis.call('HSET', KEYS[1], 'scopes', ARGV[1])
redis.call('PUBLISH', ARGV[2], ARGV[3])
return redis.call('HGETALL', KEYS[1])`

/** A user's hash fields as a record; null when there is no such user. */
function userFrom (username: string, fields: Record<string, string>): UserRecord | null {
  if (fields.passwordHash === undefined) return null
  let scopes: unknown
  try {
    scopes = fields.scopes === undefined ? [] : JSON.parse(fields.scopes)
  } catch {}
  return {
    username,
    passwordHash: fields.passwordHash,
    createdAt: fields.createdAt ?? '',
    updatedAt: fields.updatedAt ?? '',
    scopes: storedScopes(scopes),
    id: fields.id ?? '',
    credential: fields.credential ?? ''
  }
}

/** [field, value, field, value, ...] as HGETALL answers from a script */
function fieldsOf (flat: unknown[]): Record<string, string> {
  const fields: Record<string, string> = {}
  for (let i = 0; i + 1 < flat.length; i += 2) fields[String(flat[i])] = String(flat[i + 1])
  return fields
}

export function redisUsers ({ redis, names, guarded }: RedisStoreContext): UserStore {
  const { user: userKey, users: usersSet, keyEvents: keyEventsChannel } = names
  return {
    getUser: async (username) => await guarded(async () => userFrom(username, await redis.hgetall(userKey(username)))),
    putUser: async (username, passwordHash, scopes) => await guarded(async () => {
      const now = new Date().toISOString()
      // A new user gets an id (an existing one keeps it; one stored before ids gets one now), and
      // every password a new credential: tokens issued before carry the old ones.
      const multi = redis.multi()
        .hsetnx(userKey(username), 'createdAt', now)
        .hsetnx(userKey(username), 'id', newUserId())
        .hset(userKey(username), 'passwordHash', passwordHash, 'updatedAt', now, 'credential', newUserId())
        .sadd(usersSet, username)
      // in the same MULTI: the change is stored and announced together, or none of it is
      if (scopes !== undefined) multi.hset(userKey(username), 'scopes', JSON.stringify(scopes))
      multi.publish(keyEventsChannel, keyEventMessage.userChanged(username))
      const values = results(await multi.hgetall(userKey(username)).exec())
      const user = userFrom(username, values[values.length - 1] as Record<string, string>)
      if (user === null) throw new Error('the user vanished right after it was stored')
      return user
    }),
    setUserScopes: async (username, scopes) => await guarded(async () => {
      const fields = await redis.eval(SET_USER_SCOPES_SCRIPT, 1, userKey(username), JSON.stringify(scopes), keyEventsChannel,
        keyEventMessage.userChanged(username)) as unknown[] | null
      return fields === null ? null : userFrom(username, fieldsOf(fields))
    }),
    countUsers: async () => await guarded(async () => await redis.scard(usersSet)),
    listUsers: async () => await guarded(async () => {
      const usernames = (await redis.smembers(usersSet)).sort()
      if (usernames.length === 0) return []
      const multi = redis.multi()
      for (const name of usernames) multi.hgetall(userKey(name))
      const values = results(await multi.exec()) as Array<Record<string, string>>
      return usernames.flatMap((username, i) => {
        const user = userFrom(username, values[i] ?? {})
        return user === null ? [] : [user]
      })
    }),
    removeUser: async (username) => await guarded(async () => {
      const at = new Date()
      const [removed, revokedKeys] = await redis.eval(REMOVE_USER_SCRIPT, 4, userKey(username), usersSet, names.ownerKeys(username), names.revokedKeys,
        at.toISOString(), names.key(''), keyEventsChannel, username, keyEventMessage.userChanged(username), at.getTime()) as [number, string[]]
      return { removed: removed === 1, revokedKeys }
    })
  }
}
