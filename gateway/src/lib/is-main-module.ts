import { realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

/** True when the module at `metaUrl` is the script node was started with (links resolved). */
export function isMainModule (metaUrl: string): boolean {
  const entry = process.argv[1]
  if (entry === undefined) return false
  try {
    return realpathSync(entry) === realpathSync(fileURLToPath(metaUrl))
  } catch {
    return false
  }
}
