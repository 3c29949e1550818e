import { availableParallelism } from 'node:os'
import { ConfigError } from './config-error.js'

/** KEYGATE_WORKERS: more than this is a typo, not a machine */
export const MAX_WORKERS = 256

export interface WorkerCount {
  /** gateway processes to run; 1 means no cluster at all */
  count: number
  /** what was asked for: a number, or `auto` (given, or the NODE_ENV=production default) */
  requested: number | 'auto'
}

/**
 * KEYGATE_WORKERS: a number of processes, or `auto`, one per core (os.availableParallelism()).
 * Unset: `auto` when NODE_ENV=production (the Docker image sets it), else 1, so `npm start`, the
 * tests and a gateway started by hand stay one process. The embedded store lives inside one
 * process and cannot be shared: with it, `auto` means 1 (main.ts says so in a warning) and an
 * explicit number above 1 is refused, since the workers would each hold different users and keys.
 */
export function resolveWorkers (value: string | undefined, nodeEnv: string | undefined, onRedis: boolean, cores = availableParallelism()): WorkerCount {
  const requested = value === undefined ? (nodeEnv === 'production' ? 'auto' : 1) : value === 'auto' ? 'auto' : Number(value)
  if (requested === 'auto') return { count: onRedis ? Math.min(cores, MAX_WORKERS) : 1, requested }
  if (requested > MAX_WORKERS) throw new ConfigError(`KEYGATE_WORKERS: "${requested}" is not allowed: at most ${MAX_WORKERS}`)
  if (requested > 1 && !onRedis) {
    throw new ConfigError(`KEYGATE_WORKERS: ${requested} workers need Redis (REDIS_URL, KEYGATE_REDIS_SENTINELS or KEYGATE_REDIS_CLUSTER_NODES): ` +
      'the embedded in-memory store lives inside one process and cannot be shared between workers; set one, or KEYGATE_WORKERS=1')
  }
  return { count: requested, requested }
}
