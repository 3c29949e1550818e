// MCP sessions on Redis: session id -> the identity that opened it, one key each, expiring. Binding
// is SET NX (the first owner stays) with GET (Redis 7: the owner already there, in the same
// command); a lookup is GETEX, which renews the lifetime in the same command (sliding).
import type { McpSessionStore } from '../types.js'
import type { RedisStoreContext } from './context.js'

const ms = (ttlMs: number): number => Math.max(1, Math.ceil(ttlMs))

export function redisMcpSessions ({ redis, names, guarded }: RedisStoreContext): McpSessionStore {
  return {
    bindMcpSession: async (id, owner, ttlMs) => await guarded(async () => {
      const earlier = await redis.set(names.mcpSession(id), owner, 'PX', ms(ttlMs), 'NX', 'GET')
      return earlier ?? owner
    }),
    mcpSessionOwner: async (id, ttlMs) => await guarded(async () => await redis.getex(names.mcpSession(id), 'PX', ms(ttlMs))),
    forgetMcpSession: async (id) => { await guarded(async () => await redis.del(names.mcpSession(id))) }
  }
}
