// The name of every key the Redis store writes, and the one rule of Redis Cluster's hash slots the
// store leans on. Every part of the store (this folder) names its keys here.

/**
 * The name of every key the store writes. On one node (or Sentinel's one master) they are the
 * prefix and a name, as they always were.
 *
 * In Redis Cluster a script or MULTI may only touch keys of one hash slot, so the keys are in two
 * groups. The registry (users and the set of them, API keys and each owner's index of them, the
 * signing-key ring) carries one hash tag, the prefix: `keygate:{keygate}user:alice`. Its scripts
 * stay atomic: registering a key is SET NX of the key plus SADD to its owner's index in one step.
 * Per-user tags cannot keep that: the key record must be found by its apiKey alone (a request
 * names no owner until the key is read) and be unique across owners, so it lives in the apiKey's
 * slot while the owner's index would live in the owner's; no script spans two slots. The
 * registry's one slot is one shard, but its load follows logins, registrations and key-cache
 * misses, not requests: a gateway keeps parsed keys and verified tokens in memory.
 * Per-request state (replay marks of signed writes, login counters) is one key per operation and
 * carries no tag, so it spreads over every shard: that is the load that grows with traffic.
 */
export function redisKeyNames (prefix: string, cluster: boolean) {
  const registry = cluster ? `${prefix}{${prefix.replace(/:$/, '')}}` : prefix
  return {
    user: (username: string): string => `${registry}user:${username}`,
    users: `${registry}users`,
    key: (apiKey: string): string => `${registry}key:${apiKey}`,
    ownerKeys: (owner: string): string => `${registry}user-keys:${owner}`,
    // fingerprint -> apiKey, written with the record in one script: one key pair, one apiKey
    keyFingerprint: (fingerprint: string): string => `${registry}key-fingerprint:${fingerprint}`,
    // revoked keys not yet pruned, scored by the ms of their revocation (pruneRevokedKeys)
    revokedKeys: `${registry}revoked-keys`,
    // set once backfillKeyIndex has indexed every record stored before fingerprints
    keyIndexVersion: `${registry}key-index-version`,
    // read with the key records in one MULTI, so in the registry's slot; written at most once a
    // minute per key and gateway, so it adds little to that shard
    lastUsed: `${registry}keys-last-used`,
    // a channel, not a key: PUBLISH reaches every node of a cluster
    keyEvents: `${prefix}key-events`,
    signingKey: `${registry}jwt:signing-key`,
    previousSigningKeys: `${registry}jwt:previous-signing-keys`,
    once: (key: string): string => `${prefix}once:${key}`,
    hits: (key: string): string => `${prefix}hits:${key}`,
    // putOnce/takeOnce: one key each, no tag (a login's state, a handoff: per login, spread over the shards)
    takeOnce: (key: string): string => `${prefix}take-once:${key}`,
    // shareValue: one key each, no tag (DPoP's nonce of one period: spread over the shards)
    shared: (key: string): string => `${prefix}shared:${key}`,
    // per request too, and one key per counter: in a cluster they spread over every shard
    rate: (key: string): string => `${prefix}rate:${key}`,
    // MCP sessions: session id -> its owner, one key each with no tag (per session: spread over the shards)
    mcpSession: (id: string): string => `${prefix}mcp-session:${id}`,
    // usage analytics: one hash per time bucket, written in batches; each is one key, so one slot
    usage: (bucket: string): string => `${prefix}usage:${bucket}`
  }
}

export type RedisKeyNames = ReturnType<typeof redisKeyNames>

/** What Redis Cluster hashes to pick a key's slot: the first non-empty `{tag}`, else the whole key. */
export function hashedPart (key: string): string {
  const open = key.indexOf('{')
  const close = open < 0 ? -1 : key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : key
}

/**
 * A key in the hash slot of `name` (a cluster runs a script only on keys of one slot): under
 * `name`'s own hash tag when it has one, else under a tag that is all of `name`. A name with a
 * `}` and no tag cannot be wrapped so (the tag would end at that `}`): an Error, not a key that
 * Redis Cluster would refuse in the script (CROSSSLOT) on every call.
 */
export function sameSlotKey (name: string, suffix: string): string {
  const key = hashedPart(name) !== name ? `${name}${suffix}` : `{${name}}${suffix}`
  if (hashedPart(key) !== hashedPart(name)) throw new Error(`no key can share the hash slot of ${name}: it holds a } but no {tag}`)
  return key
}
