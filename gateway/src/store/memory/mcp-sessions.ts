// MCP sessions in one process: session id -> the identity that opened it, until it expires (each
// lookup renews it). `sweep`: the store's timer drops the expired ones.
import type { McpSessionStore } from '../types.js'

export function memoryMcpSessions (now: () => number): McpSessionStore & { sweep: (t: number) => void } {
  const sessions = new Map<string, { owner: string; expiresAt: number }>()
  const live = (id: string): { owner: string; expiresAt: number } | undefined => {
    const held = sessions.get(id)
    if (held !== undefined && held.expiresAt <= now()) sessions.delete(id)
    else return held
  }
  return {
    sweep: (t) => {
      for (const [id, { expiresAt }] of sessions) if (expiresAt <= t) sessions.delete(id)
    },
    async bindMcpSession (id, owner, ttlMs) {
      const held = live(id)
      if (held !== undefined) return held.owner
      sessions.set(id, { owner, expiresAt: now() + ttlMs })
      return owner
    },
    async mcpSessionOwner (id, ttlMs) {
      const held = live(id)
      if (held === undefined) return null
      held.expiresAt = now() + ttlMs
      return held.owner
    },
    async forgetMcpSession (id) {
      sessions.delete(id)
    }
  }
}
