// Route files written to a temporary folder, for gateways started with KEYGATE_ROUTES; and a
// route file's text made into routes, for gateways started in the test's own process.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { RouteConfig } from '../../gateway/src/proxy/route.js'
import { RouteFileError, parseRouteText, routesFromDocument } from '../../gateway/src/proxy/route-file.js'

export interface RouteFileHandle {
  path: string
  write: (text: string) => void
}

export function routeFile (t: { teardown: (fn: () => unknown) => void }, text: string, name = 'routes.yaml'): RouteFileHandle {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-routes-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  const path = join(dir, name)
  const write = (next: string): void => { writeFileSync(path, next) }
  write(text)
  return { path, write }
}

/** The routes of a route file's text in which every UPSTREAM stands for `upstream` (as the route file's checks make them). */
export function routesFromYaml (yaml: string, upstream: string): RouteConfig[] {
  const document = parseRouteText(yaml.replaceAll('UPSTREAM', upstream), 'routes.yaml')
  return routesFromDocument(document, 'routes.yaml', { upstream, bodyLimit: 1024 * 1024, timeoutMs: 5000 })
}

const ENTRY_DEFAULTS = { upstream: 'http://127.0.0.1:8081', bodyLimit: 1048576, timeoutMs: 30000 }

/** The routes of a whole route file's text (routes.yaml, the defaults the checks use). */
export function routesOfText (yaml: string): RouteConfig[] {
  return routesFromDocument(parseRouteText(yaml, 'routes.yaml'), 'routes.yaml', ENTRY_DEFAULTS)
}

/** What the route file says is wrong with that text, a problem a line; none when it loads. */
export function routeTextProblems (yaml: string): string[] {
  try {
    routesOfText(yaml)
  } catch (err) {
    if (err instanceof RouteFileError) return err.message.split('\n')
    throw err
  }
  return []
}

/** `entry`'s YAML lines under "- prefix: /a/" (name a, upstream http://x): a file of one route. */
const entryText = (entry: string): string =>
  `routes:\n  - prefix: /a/\n    name: a\n    upstream: http://x\n${entry.split('\n').map((line) => `    ${line}`).join('\n')}\n`

/** The routes of one route entry, for tests of a route option alone. */
export function routesOfEntry (entry: string): RouteConfig[] {
  return routesOfText(entryText(entry))
}

/** What the route file says is wrong with that entry, a problem a line; none when it loads. */
export function routeEntryProblems (entry: string): string[] {
  return routeTextProblems(entryText(entry))
}
