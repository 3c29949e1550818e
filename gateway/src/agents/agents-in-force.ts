// The agents file in force (KEYGATE_AGENT_DIRECTORIES, agents-file.ts), swapped whole when it is
// reloaded (proxy/config-reload.ts, docs/routes.md#reloading): the directories it pins with their
// keys, and the origins it lets keygate fetch on a private address. What reads it (the directory
// fetch's address guard, the agent directories' pins, `named` for the directory budget) reads
// the file in force at each request, never a copy made at start.
import { changesByName, type Changes } from '../lib/changes.js'
import type { PinnedDirectory } from './agent-directories.js'
import { NO_AGENT_SETTINGS, type AgentsSettings } from './agents-file.js'

/** what a reload changed, by directory origin */
export type AgentChanges = Changes

export interface AgentsInForce {
  /** KEYGATE_AGENT_DIRECTORIES; undefined: no agents file */
  readonly file: string | undefined
  readonly settings: AgentsSettings
  /** the agents file names this directory origin (pinned, or allowed on a private address) */
  named: (origin: string) => boolean
  /** the origins fetched although they resolve to a private address, as the file in force says when iterated */
  readonly privateOrigins: Iterable<string>
  /** puts `settings` in force; what changed, by origin */
  swap: (settings: AgentsSettings) => AgentChanges
}

interface Directory { origin: string, keys: readonly string[], privateAddress: boolean }

/** each origin the settings name, with its keys' thumbprints and whether it may be on a private address */
function directoriesOf (settings: AgentsSettings): Directory[] {
  const pinned = new Map<string, PinnedDirectory>(settings.pinned.map((directory) => [directory.origin, directory]))
  const origins = new Set([...pinned.keys(), ...settings.privateOrigins])
  return [...origins].map((origin) => ({
    origin,
    keys: (pinned.get(origin)?.keys ?? []).map((key) => key.thumbprint).sort(),
    privateAddress: settings.privateOrigins.has(origin)
  }))
}

/**
 * `onSwap`: told the settings now in force and the origins whose entry changed (added, removed or
 * changed), whose directories fetched under the old entry are then dropped (agent-directories.ts repin).
 */
export function createAgentsInForce (file: string | undefined, initial: AgentsSettings = NO_AGENT_SETTINGS,
  onSwap?: (settings: AgentsSettings, touched: ReadonlySet<string>) => void): AgentsInForce {
  let current = initial
  let named = new Set(directoriesOf(initial).map((directory) => directory.origin))
  return {
    file,
    get settings () { return current },
    named: (origin) => named.has(origin),
    privateOrigins: { [Symbol.iterator]: () => current.privateOrigins[Symbol.iterator]() },
    swap (settings) {
      const changes = changesByName(directoriesOf(current), directoriesOf(settings), (d) => d.origin, (d) => JSON.stringify(d))
      current = settings
      named = new Set(directoriesOf(settings).map((directory) => directory.origin))
      onSwap?.(settings, new Set([...changes.added, ...changes.removed, ...changes.changed]))
      return changes
    }
  }
}
