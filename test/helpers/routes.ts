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

/**
 * The routes of one route entry: `entry`'s YAML lines under "- prefix: /a/" (name a, upstream
 * http://x), for tests of a route option alone.
 */
export function routesOfEntry (entry: string): RouteConfig[] {
  const text = `routes:\n  - prefix: /a/\n    name: a\n    upstream: http://x\n${entry.split('\n').map((line) => `    ${line}`).join('\n')}\n`
  return routesFromDocument(parseRouteText(text, 'routes.yaml'), 'routes.yaml', { upstream: 'http://127.0.0.1:8081', bodyLimit: 1048576, timeoutMs: 30000 })
}

/** What the route file says is wrong with that entry, a problem a line; none when it loads. */
export function routeEntryProblems (entry: string): string[] {
  try {
    routesOfEntry(entry)
  } catch (err) {
    if (err instanceof RouteFileError) return err.message.split('\n')
    throw err
  }
  return []
}
