// The developer portal as an installed keygate serves it (the package, the Docker image): its
// built page, whose two references are content-hashed bundles that load, with no esbuild there to
// bundle anything at run time.
import type { Test } from 'tap'
import { send } from './http.js'

/** Checks that `baseUrl` serves the portal's page and bundles; returns the bundles' paths. */
export async function checkPortalServed (t: Test, baseUrl: string): Promise<string[]> {
  const page = await send(baseUrl, '/portal/')
  t.equal(page.status, 200, 'the developer portal\'s page is served')
  t.match(page.headers['content-security-policy'], /script-src 'self';/, 'with its Content-Security-Policy')
  const bundles = [...page.text.matchAll(/(?:src|href)="(assets\/(?:main|style)\.[A-Z0-9]+\.(?:js|css))"/g)].map((m) => m[1] as string)
  t.equal(bundles.length, 2, `it names two content-hashed bundles (${bundles.join(', ')})`)
  for (const bundle of bundles) {
    const file = await send(baseUrl, `/portal/${bundle}`)
    t.equal(file.status, 200, `${bundle} loads`)
    t.match(file.headers['content-type'], bundle.endsWith('.js') ? /^text\/javascript/ : /^text\/css/)
    t.ok(file.text.length > 0)
  }
  return bundles
}
