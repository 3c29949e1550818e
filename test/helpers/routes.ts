// Route files written to a temporary folder, for gateways started with KEYGATE_ROUTES.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

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
