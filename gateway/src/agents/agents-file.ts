// The operator's word on signed agents' directories (KEYGATE_AGENT_DIRECTORIES, docs/agents.md):
// directories pinned with their keys (never fetched: a known agent costs keygate no fetch at all,
// and its directory's outage nothing), and origins that may be fetched although they resolve to
// a private address (an agent inside the operator's network). YAML or JSON, one schema, every
// mistake reported at once, like the route and issuers files.
import { basename } from 'node:path'
import { Type, type Static } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { readDocumentFile, schemaProblems } from '../config/document-file.js'
import { ConfigError } from '../config/env.js'
import { publishedKeysOf } from '../remote-keys/published-keys.js'
import { agentOriginProblem } from './signature-agent.js'
import { AGENT_KEY_ALGORITHMS, DIRECTORY_MAX_KEYS, type PinnedDirectory } from './agent-directories.js'

const DirectorySchema = Type.Object({
  origin: Type.String({ minLength: 9, maxLength: 300, description: 'the agent\'s directory origin: https://host[:port]' }),
  keys: Type.Optional(Type.Array(Type.Record(Type.String(), Type.Unknown()), { minItems: 1, maxItems: DIRECTORY_MAX_KEYS })),
  privateAddress: Type.Optional(Type.Boolean({ description: 'fetched even where it resolves to a private (not loopback-only) address' }))
}, { additionalProperties: false })

const AgentsFileSchema = Type.Object({ directories: Type.Array(DirectorySchema, { minItems: 1, maxItems: 1000 }) }, { additionalProperties: false })

export interface AgentsSettings {
  pinned: PinnedDirectory[]
  /** origins fetched although they resolve to a private address */
  privateOrigins: ReadonlySet<string>
}

export const NO_AGENT_SETTINGS: AgentsSettings = { pinned: [], privateOrigins: new Set() }

export class AgentsFileError extends ConfigError {
  readonly problems: string[]
  constructor (file: string, problems: string[]) {
    super(`${file}: ${problems.length === 1 ? problems[0] ?? '' : `${problems.length} problems:\n  - ${problems.join('\n  - ')}`}`)
    this.name = 'AgentsFileError'
    this.problems = problems
  }
}

/** A parsed agents document -> the settings; AgentsFileError with every problem. */
export async function agentsFromDocument (document: unknown, file: string): Promise<AgentsSettings> {
  const problems: string[] = []
  if (!Value.Check(AgentsFileSchema, document)) throw new AgentsFileError(file, schemaProblems(AgentsFileSchema, document))
  const pinned: PinnedDirectory[] = []
  const privateOrigins = new Set<string>()
  const seen = new Set<string>()
  for (const [i, entry] of (document as Static<typeof AgentsFileSchema>).directories.entries()) {
    const at = `directories[${i}]`
    const originProblem = agentOriginProblem(entry.origin)
    if (originProblem !== undefined) {
      problems.push(`${at}.origin: ${originProblem}`)
      continue
    }
    if (seen.has(entry.origin)) problems.push(`${at}.origin: ${entry.origin} is named twice; each directory once`)
    seen.add(entry.origin)
    if (entry.privateAddress === true) privateOrigins.add(entry.origin)
    if (entry.keys === undefined) {
      if (entry.privateAddress !== true) problems.push(`${at}: give its keys (pinned: never fetched), or privateAddress: true (fetched on a private address)`)
      continue
    }
    const { keys, ignored } = await publishedKeysOf(entry.keys, AGENT_KEY_ALGORITHMS, 'thumbprint')
    for (const why of ignored) problems.push(`${at}.keys: ${why}`)
    if (keys.length === 0 && ignored.length === 0) problems.push(`${at}.keys: no key keygate can verify with (Ed25519, RSA of 2048 bits or more, P-256)`)
    pinned.push({ origin: entry.origin, keys })
  }
  if (problems.length > 0) throw new AgentsFileError(file, problems)
  return { pinned, privateOrigins }
}

/** Reads and checks an agents file (YAML or JSON); none: no pinned directory. */
export async function loadAgentsFile (path: string | undefined): Promise<AgentsSettings> {
  if (path === undefined) return NO_AGENT_SETTINGS
  const document = await readDocumentFile(path, (where, problem) => new AgentsFileError(where, [problem]))
  return await agentsFromDocument(document, basename(path))
}
