// Key events on Redis: users.ts and keys.ts PUBLISH a message on the key-events channel in the
// same step as the change it announces; every gateway's subscriber hears it and tells its
// listeners (watchKeys). What travels on the channel is spelt here, both ways.
import { API_KEY_PATTERN } from '#client/protocol'
import { createRedisClient, type RedisClient, type RedisConnection } from '../redis-connection.js'
import type { KeyEvent, KeyEventListener, KeyEventStore } from '../types.js'

/**
 * What travels on the key-events channel: a revoked key's apiKey alone (as keygate always sent),
 * `changed:<apiKey>`, `user:<username>`. A gateway of an older version ignores the new two.
 */
export const keyEventMessage = {
  changed: (apiKey: string): string => `changed:${apiKey}`,
  userChanged: (username: string): string => `user:${username}`
}

/** The event a key-events message announces; undefined for anything else. */
export function parseKeyEventMessage (message: string): KeyEvent | undefined {
  if (API_KEY_PATTERN.test(message)) return { type: 'revoked', apiKey: message }
  if (message.startsWith('changed:')) {
    const apiKey = message.slice('changed:'.length)
    return API_KEY_PATTERN.test(apiKey) ? { type: 'changed', apiKey } : undefined
  }
  if (message.startsWith('user:') && message.length > 'user:'.length) return { type: 'user-changed', username: message.slice('user:'.length) }
  return undefined
}

export interface KeyEventSubscription {
  /** the store's Redis: the subscriber is a connection of its own there */
  connection: RedisConnection
  commandTimeoutMs: number
  /** the store's prefix, named in the subscriber's connection name */
  prefix: string
  /** the key-events channel (key-names.ts) */
  channel: string
}

/**
 * One subscriber connection (a subscribed connection can run nothing else), made when the first
 * listener arrives. Every time its subscription is (re)established, listeners hear `resync`:
 * revocations announced while it was away are lost, so cached keys must go. `stop`: the store closes.
 */
export function redisKeyEvents ({ connection, commandTimeoutMs, prefix, channel }: KeyEventSubscription): KeyEventStore & { stop: () => Promise<void> } {
  const listeners = new Set<KeyEventListener>()
  let subscriber: RedisClient | undefined
  const emit = (event: KeyEvent): void => { for (const listener of listeners) listener(event) }
  const startSubscriber = (): RedisClient => {
    const sub = createRedisClient(connection, { commandTimeoutMs }, {
      autoResubscribe: false,
      // visible in CLIENT LIST: which gateway prefix this subscription serves
      connectionName: `keygate-sub:${prefix}`.replace(/[^\w:.@-]/g, '_').slice(0, 200)
    })
    sub.on('error', () => {})
    sub.connect().catch(() => {})
    sub.on('ready', () => {
      sub.subscribe(channel).then(() => { emit({ type: 'resync' }) }, () => {
        // Not subscribed on a live connection: drop it, and the next 'ready' tries again.
        sub.disconnect(true)
      })
    })
    sub.on('message', (from: string, message: string) => {
      const event = from === channel ? parseKeyEventMessage(message) : undefined
      if (event !== undefined) emit(event)
    })
    return sub
  }
  const stopSubscriber = async (): Promise<void> => {
    const sub = subscriber
    subscriber = undefined
    if (sub === undefined) return
    try {
      await sub.quit()
    } catch {}
    // Also after a clean QUIT: it alone leaves Sentinel's failover-detector connections open.
    sub.disconnect()
  }
  return {
    watchKeys: async (listener) => {
      listeners.add(listener)
      subscriber ??= startSubscriber()
      return async () => {
        listeners.delete(listener)
        if (listeners.size === 0) await stopSubscriber()
      }
    },
    stop: async () => {
      listeners.clear()
      await stopSubscriber()
    }
  }
}
