// The layers of the code, checked from its imports: a folder imports only from the layers below
// it (or its own), no two folders import each other, there are no import loops, and the client
// package stands on its own. The Layout of docs/tests.md describes the same order.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { builtinModules } from 'node:module'
import { dirname, join, normalize, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

/**
 * The rooms, lower ranks first: a file may import files of its own rank or lower. A room is a
 * folder (a file is in the room of its own folder, else of the nearest folder above it listed
 * here), or one of gateway/src's own files, each a room of its own. No file is ranked apart from
 * its folder: a file that belongs lower belongs in a lower folder.
 */
const LAYERS: Array<[room: string, rank: number]> = [
  ['client/src/protocol/', 0],
  ['client/src/', 1],
  ['gateway/src/errors.ts', 1],
  // the example service, which keygate demo runs: it imports nothing of keygate's
  ['upstream-stub/src/', 1],
  ['gateway/src/lib/', 1],
  // the developer portal: its browser code (over the client package) and the bundling of it
  ['gateway/portal/src/', 1.5],
  ['gateway/src/portal/', 1.5],
  // the environment, tracing's OTEL_* variables included (config/tracing.ts: no OpenTelemetry module)
  ['gateway/src/config/', 2],
  ['gateway/src/store/', 3],
  // fetching a URL someone else named, refusing private, loopback and metadata addresses by the address connected to: undici and ipaddr.js only
  ['gateway/src/net/', 3.2],
  // a JWK Set fetched from a URL someone else controls (an IdP's JWKS, an agent's key directory): lib, errors and jose only
  ['gateway/src/remote-keys/', 3.5],
  ['gateway/src/keys/', 4],
  ['gateway/src/tokens/', 4],
  // trusted identity providers: their issuers and the verification of their access tokens
  ['gateway/src/idp/', 4],
  // DPoP (RFC 9449): the proof verifier and the server nonces, over the store's once-marks: no HTTP, no tokens
  ['gateway/src/dpop/', 4],
  // signed agents (Web Bot Auth): where an agent's keys are (Signature-Agent) and its directories, kept within bounds
  ['gateway/src/agents/', 4],
  ['gateway/src/users/', 4],
  ['gateway/src/metrics/', 4],
  ['gateway/src/limits/', 4],
  // usage analytics: counted in process, flushed to the store, read back by the admin API and the account endpoints
  ['gateway/src/analytics/', 4],
  // protected resources (RFC 9728, RFC 8707): their identifiers, metadata, challenges and audience check
  ['gateway/src/resources/', 4.5],
  // MCP: the strict reading of a JSON-RPC body, an MCP route's policy, its JSON-RPC refusals
  ['gateway/src/mcp-calls/', 4],
  ['gateway/src/auth/', 5],
  ['gateway/src/proxy/', 6],
  // MCP-aware routes: what keygate judges of an MCP exchange (sessions and who opened each)
  ['gateway/src/mcp/', 6.5],
  ['gateway/src/http/schemas/', 7],
  ['gateway/src/http/docs/', 7],
  ['gateway/src/http/plugins/', 7.1],
  // OpenTelemetry traces (loaded only when on): spans over the auth stages, the proxy's upstream call and the listeners' requests
  ['gateway/src/tracing/', 7.15],
  ['gateway/src/http/routes/', 7.2],
  // the HTTP layer's own files: the listeners built of its plugins (the metrics listener; the options of those that judge requests)
  ['gateway/src/http/', 7.2],
  ['gateway/src/types.ts', 7.2],
  // the admin API: its own listener over the services, the HTTP layer's plugins and schemas
  ['gateway/src/admin/', 7.3],
  // decision mode: its own listener over the services, the proxy's admission and the HTTP layer's plugins
  ['gateway/src/decision/', 7.3],
  ['gateway/src/app.ts', 8],
  ['gateway/src/process/', 9],
  ['gateway/src/cli/', 9],
  ['gateway/src/main.ts', 10]
]

const RANKS = new Map(LAYERS)

/** The room a file is in: gateway/src's own file, else the nearest folder above it that LAYERS lists. */
function roomOf (file: string): string {
  if (RANKS.has(file)) return file
  for (let dir = dirname(file); dir !== '.'; dir = dirname(dir)) if (RANKS.has(`${dir}/`)) return `${dir}/`
  throw new Error(`${file} is in no layer: add its folder to LAYERS (and to docs/tests.md's Layout)`)
}

function rankOf (file: string): number {
  return RANKS.get(roomOf(file)) as number
}

function sources (dir: string): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.ts'))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name)))
}

type ConditionalTargets = Record<string, Record<string, string> | string>
function sourcesOf (map: ConditionalTargets, prefix: string, base: string): Array<[string, string]> {
  return Object.entries(map).flatMap(([name, target]) => typeof target === 'string' || target['keygate-source'] === undefined
    ? []
    : [[prefix + name.replace(/^\.\/?/, ''), normalize(join(base, target['keygate-source']))]])
}
/**
 * the client package's entry points, imported by name: the package's own (`@keygate/client`, its
 * exports) and keygate's subpath imports of it (`#client`, which the keygate package compiles in),
 * each mapped to the source file its keygate-source condition names
 */
const CLIENT_PACKAGE: Record<string, string> = Object.fromEntries([
  ...sourcesOf((JSON.parse(readFileSync(join(ROOT, 'client/package.json'), 'utf8')) as { exports: ConditionalTargets }).exports, '@keygate/client/', 'client'),
  ...sourcesOf((JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { imports: ConditionalTargets }).imports, '', '.')
].map(([name, file]) => [name.replace(/\/$/, ''), file]))
// static imports and re-exports, side-effect imports, and import('...'): a module loaded when needed, or a type named in place
const IMPORT = /^\s*(?:import|export)\s[^'"]*?from\s+'([^']+)'|^\s*import\s+'([^']+)'|\bimport\(\s*'([^']+)'\s*\)/gm

interface Imports { local: string[]; packages: string[] }

function importsOf (file: string): Imports {
  const text = readFileSync(join(ROOT, file), 'utf8')
  const out: Imports = { local: [], packages: [] }
  for (const match of text.matchAll(IMPORT)) {
    const spec = (match[1] ?? match[2] ?? match[3]) as string
    if (spec.startsWith('.')) out.local.push(normalize(join(dirname(file), spec)).replace(/\.js$/, '.ts'))
    else if (CLIENT_PACKAGE[spec] !== undefined) out.local.push(CLIENT_PACKAGE[spec])
    else out.packages.push(spec)
  }
  return out
}

const files = [...sources('client/src'), ...sources('gateway/src'), ...sources('gateway/portal')]
const graph = new Map(files.map((file) => [file, importsOf(file)]))

t.test('every import points down the layers', async (t) => {
  const upward = files.flatMap((file) => graph.get(file)!.local
    .filter((target) => rankOf(target) > rankOf(file))
    .map((target) => `${file} -> ${target}`))
  t.same(upward, [], 'no import from a lower layer to a higher one')
})

/** Every loop of `edges` over `nodes`, as `a -> b -> a`. */
function loopsOf (nodes: readonly string[], edges: (node: string) => readonly string[]): string[] {
  const loops: string[] = []
  const state = new Map<string, 'open' | 'done'>()
  const visit = (node: string, path: string[]): void => {
    if (state.get(node) === 'done') return
    if (state.get(node) === 'open') {
      loops.push([...path.slice(path.indexOf(node)), node].join(' -> '))
      return
    }
    state.set(node, 'open')
    for (const target of edges(node)) visit(target, [...path, node])
    state.set(node, 'done')
  }
  for (const node of nodes) visit(node, [])
  return loops
}

t.test('no import loops', async (t) => {
  t.same(loopsOf(files, (file) => graph.get(file)?.local ?? []), [])
})

t.test('every room is a folder, or one of gateway/src\'s own files: no file is ranked apart from its folder', async (t) => {
  for (const [room] of LAYERS) {
    t.ok(room.endsWith('/') || /^gateway\/src\/[^/]+\.ts$/.test(room), `${room} is a folder or a file of gateway/src's own`)
    t.ok(existsSync(join(ROOT, room)), `${room} exists`)
  }
  t.equal(RANKS.size, LAYERS.length, 'each room listed once')
})

t.test('no two rooms import each other, nor any longer loop of rooms', async (t) => {
  // Ranks of equal value may import each other file by file without a loop of files; their rooms may not.
  const rooms = new Map<string, Set<string>>()
  for (const file of files) {
    const from = roomOf(file)
    const targets = rooms.get(from) ?? rooms.set(from, new Set()).get(from)!
    for (const target of graph.get(file)!.local) if (roomOf(target) !== from) targets.add(roomOf(target))
  }
  t.same(loopsOf([...rooms.keys()], (room) => [...rooms.get(room) ?? []]), [])
  t.ok(rooms.get('gateway/src/app.ts')?.has('gateway/src/http/routes/'), 'the rooms\' imports are seen: app.ts -> http/routes/')
})

t.test('the client package stands on its own', async (t) => {
  for (const file of files.filter((f) => f.startsWith('client/'))) {
    const { local, packages } = graph.get(file)!
    t.same(local.filter((target) => !target.startsWith('client/src/')), [], `${file} imports nothing outside the client package`)
    // not even node:crypto: the client runs in browsers, Deno and Bun too, on WebCrypto
    t.same(packages, [], `${file} imports no package, node: modules included`)
  }
})

t.test('the portal\'s code runs in the page: it imports the client package, and no Node.js module', async (t) => {
  const portal = files.filter((f) => f.startsWith('gateway/portal/'))
  t.ok(portal.length > 0, 'there is portal code')
  for (const file of portal) {
    const { local, packages } = graph.get(file)!
    t.same(local.filter((target) => !target.startsWith('client/src/') && !target.startsWith('gateway/portal/')), [],
      `${file} imports nothing but the client package and the portal`)
    t.same(packages.filter((name) => name.startsWith('node:') || builtinModules.includes(name)), [], `${file} imports no Node.js module`)
  }
  t.same(files.filter((file) => !file.startsWith('gateway/portal/') && graph.get(file)!.local.some((target) => target.startsWith('gateway/portal/'))), [],
    'and nothing else imports it')
})

t.test('the layer check sees the code it checks', async (t) => {
  // A regex that silently matched nothing would pass every test above.
  t.ok(graph.get('gateway/src/app.ts')!.local.includes('gateway/src/http/routes/proxy.ts'), 'app.ts -> http/routes/proxy.ts is seen')
  t.ok(graph.get('gateway/src/auth/replay.ts')!.local.includes('client/src/protocol/index.ts'), 'the protocol package import is seen')
  t.ok(graph.get('gateway/src/cli/client-commands.ts')!.local.includes('client/src/index.ts'), 'the client package import is seen')
  t.ok(graph.get('gateway/portal/src/snippets.ts')!.local.includes('client/src/protocol/index.ts'), 'the portal\'s imports are seen')
  t.ok(graph.get('gateway/src/http/routes/proxy.ts')!.packages.includes('fastify'), 'package imports are seen')
  t.ok(graph.get('gateway/src/app.ts')!.local.includes('gateway/src/tracing/tracer.ts'), 'a module loaded when needed (import(...)) is seen')
  t.ok(graph.get('gateway/src/cli/keygate.ts')!.local.includes('gateway/src/cli/operator.ts'), 'a type named in place (import(...).Type) is seen')
})

t.test('the client entry points the graph follows', async (t) => {
  t.same(CLIENT_PACKAGE, {
    '@keygate/client': 'client/src/index.ts',
    '@keygate/client/protocol': 'client/src/protocol/index.ts',
    '#client': 'client/src/index.ts',
    '#client/protocol': 'client/src/protocol/index.ts'
  })
})
