// The developer portal's files, as keygate serves them: its page (gateway/portal/index.html) and
// two content-hashed bundles, the TypeScript of gateway/portal/src with @keygate/client's sources
// (one protocol core in the browser and in Node) and the stylesheet. `npm run build` writes them
// to dist/portal/ (scripts/build-portal.ts), which the packaged gateway reads; from the sources
// (npm start, the tests) they are bundled in memory by esbuild, a devDependency, on the first
// portal request, so a gateway that never serves the portal never pays for it.
import { createHash } from 'node:crypto'
import { existsSync } from 'node:fs'
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises'
import { basename, extname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

/** under the portal's prefix: the page at `/`, the bundles here */
export const ASSETS_FOLDER = 'assets'
/** what the page names, rewritten to the hashed bundles (the page must name exactly these) */
const SCRIPT_REFERENCE = 'src="./src/main.ts"'
const STYLE_REFERENCE = 'href="./style.css"'

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8'
}

export interface PortalFile {
  body: Buffer
  contentType: string
  /** a strong validator: the body's hash */
  etag: string
}

export interface PortalFiles {
  page: PortalFile
  /** by file name, e.g. main.3FZQ2K7A.js */
  assets: ReadonlyMap<string, PortalFile>
}

const SOURCES = fileURLToPath(new URL('../../portal/', import.meta.url))
/** from dist/gateway/src/portal/assets.js, dist/portal/ */
const BUILT = fileURLToPath(new URL('../../../portal/', import.meta.url))

function portalFile (name: string, body: Buffer): PortalFile {
  const contentType = CONTENT_TYPES[extname(name)]
  if (contentType === undefined) throw new Error(`portal: no content type for ${name}`)
  return { body, contentType, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` }
}

/** The page with its two references pointing at the bundles, each with its Subresource Integrity hash. */
function linkedPage (html: string, script: { name: string; body: Buffer }, style: { name: string; body: Buffer }): string {
  const integrity = (body: Buffer): string => `sha384-${createHash('sha384').update(body).digest('base64')}`
  for (const reference of [SCRIPT_REFERENCE, STYLE_REFERENCE]) {
    if (html.split(reference).length !== 2) throw new Error(`portal: index.html must hold ${reference} exactly once`)
  }
  return html
    .replace(SCRIPT_REFERENCE, `src="${ASSETS_FOLDER}/${script.name}" integrity="${integrity(script.body)}"`)
    .replace(STYLE_REFERENCE, `href="${ASSETS_FOLDER}/${style.name}" integrity="${integrity(style.body)}"`)
}

/** Bundles the portal's sources with esbuild: what `npm run build` writes and what a gateway run from the sources serves. */
export async function bundlePortal (sources = SOURCES): Promise<PortalFiles> {
  const { build } = await import('esbuild')
  const result = await build({
    entryPoints: [join(sources, 'src/main.ts'), join(sources, 'style.css')],
    bundle: true,
    format: 'esm',
    platform: 'browser',
    // what the page needs: Ed25519 in WebCrypto arrived in Chrome 137, Firefox 129, Safari 17
    target: ['es2022'],
    conditions: ['keygate-source'],
    minify: true,
    legalComments: 'none',
    entryNames: '[name].[hash]',
    outdir: '/portal',
    write: false,
    logLevel: 'silent'
  })
  const assets = new Map<string, PortalFile>()
  let script: { name: string; body: Buffer } | undefined
  let style: { name: string; body: Buffer } | undefined
  for (const output of result.outputFiles) {
    const name = basename(output.path)
    const body = Buffer.from(output.contents)
    assets.set(name, portalFile(name, body))
    if (name.startsWith('main.') && name.endsWith('.js')) script = { name, body }
    if (name.startsWith('style.') && name.endsWith('.css')) style = { name, body }
  }
  if (script === undefined || style === undefined) throw new Error('portal: esbuild made no main.*.js or style.*.css')
  const html = await readFile(join(sources, 'index.html'), 'utf8')
  return { page: portalFile('index.html', Buffer.from(linkedPage(html, script, style))), assets }
}

/** Writes the bundled portal to a folder: index.html and assets/ (`npm run build`). */
export async function writePortal (files: PortalFiles, folder: string): Promise<void> {
  await mkdir(join(folder, ASSETS_FOLDER), { recursive: true })
  await writeFile(join(folder, 'index.html'), files.page.body)
  for (const [name, file] of files.assets) await writeFile(join(folder, ASSETS_FOLDER, name), file.body)
}

async function readPortal (folder: string): Promise<PortalFiles> {
  const assets = new Map<string, PortalFile>()
  for (const name of await readdir(join(folder, ASSETS_FOLDER))) assets.set(name, portalFile(name, await readFile(join(folder, ASSETS_FOLDER, name))))
  return { page: portalFile('index.html', await readFile(join(folder, 'index.html'))), assets }
}

/** The portal's files: the built ones next to compiled code, else bundled from the sources. */
export async function loadPortal (): Promise<PortalFiles> {
  if (import.meta.url.endsWith('.js') && existsSync(join(BUILT, 'index.html'))) return await readPortal(BUILT)
  if (!existsSync(join(SOURCES, 'index.html'))) {
    throw new Error(`portal: neither ${BUILT} (npm run build writes it) nor the sources at ${SOURCES} exist`)
  }
  return await bundlePortal()
}
