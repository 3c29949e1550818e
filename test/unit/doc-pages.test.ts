// The docs tell the truth and can be found: every error code and variable the code knows is on its
// page (and nothing else), the route files shown are valid and the complete example is the shipped
// file, the README stays short and maps every page, and each long page opens with its contents.
// (The README walkthrough runs in test/system/readme.test.ts; links in test/unit/markdown-links.test.ts.)
import { readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { ENV_VARIABLES } from '../../gateway/src/config/env.js'
import { ERRORS } from '../../gateway/src/errors.js'
import { parseRouteText, routesFromDocument } from '../../gateway/src/proxy/route-file.js'
import { docBlocks, docPage } from '../helpers/docs.js'

/** The first cells of a page's table rows that name a code or variable: | `NAME` | */
const firstCells = (markdown: string): string[] =>
  [...markdown.matchAll(/^\| `([A-Z0-9_]+)` \|/gm)].map((m) => m[1] as string)

/** The page's lines outside fenced code blocks, where headings are headings. */
function proseLines (markdown: string): string[] {
  let fence: string | undefined
  return markdown.split('\n').filter((line) => {
    const opening = /^(```+|~~~+)/.exec(line)?.[1]
    if (opening === undefined) return fence === undefined
    if (fence === undefined) fence = opening
    else if (line.trim() === fence) fence = undefined
    return false
  })
}

const DOC_PAGES = readdirSync(new URL('../../docs/', import.meta.url), { recursive: true, encoding: 'utf8' })
  .filter((name) => name.endsWith('.md')).sort().map((name) => `docs/${name}`)
/** the pages of docs/ itself; those of its folders (docs/decision/) are reached from one of these */
const TOP_PAGES = DOC_PAGES.filter((page) => !page.slice('docs/'.length).includes('/'))

t.test('every error code is in the table of docs/errors.md, with its status, and only those', async (t) => {
  const page = docPage('docs/errors.md')
  const documented = new Set(firstCells(page))
  for (const code of Object.keys(ERRORS)) t.ok(documented.has(code), `${code} is documented`)
  const upstreamCodes = ['CLIENT_EXISTS']
  t.same([...documented].filter((c) => !(c in ERRORS) && !upstreamCodes.includes(c)), [], 'no documented code is unknown to the catalog')
  for (const [code, { status }] of Object.entries(ERRORS)) {
    t.match(page, new RegExp(`\\| \`${code}\` \\| ${status} \\|`), `${code} is documented with status ${status}`)
  }
})

t.test('every environment variable is in the tables of docs/configuration.md, once, and only those', async (t) => {
  const documented = firstCells(docPage('docs/configuration.md'))
  t.same([...documented].sort(), [...ENV_VARIABLES].sort())
})

t.test('the route files of docs/routes.md are valid, and the complete example is the shipped file', async (t) => {
  const blocks = [
    ...docBlocks('docs/routes.md', 'A route file', 'yaml'),
    ...docBlocks('docs/routes.md', 'A complete example', 'yaml'),
    ...docBlocks('docs/routes.md', 'Rate limits and quotas', 'yaml')
  ]
  t.equal(blocks.length, [...docPage('docs/routes.md').matchAll(/^```yaml$/gm)].length, 'every route file of the page')
  for (const block of blocks) {
    const routes = routesFromDocument(parseRouteText(block, 'docs/routes.md'), 'docs/routes.md', { upstream: 'http://x', bodyLimit: 1, timeoutMs: 1 })
    t.ok(routes.length >= 2, `a route file of ${routes.length} routes`)
  }
  t.same(docBlocks('docs/routes.md', 'A complete example', 'yaml'),
    [readFileSync(new URL('../../gateway/examples/routes.yaml', import.meta.url), 'utf8')])
})

t.test('the CLI example creates another client than the walkthrough, so a newcomer can follow both in order', async (t) => {
  const taxIds = (text: string): string[] => [...text.matchAll(/\\?"tax_id\\?":\\?"(\d+)\\?"/g)].map((m) => m[1] as string)
  const walkthrough = /<!-- walkthrough:start -->\n```sh\n([\s\S]*?)```/.exec(docPage('README.md'))?.[1] ?? ''
  const cli = docBlocks('docs/cli.md', 'From nothing to a signed request', 'sh')[0] ?? ''
  const walkthroughIds = taxIds(walkthrough)
  const cliIds = taxIds(cli)
  t.ok(walkthroughIds.length > 0 && cliIds.length > 0, 'both create a client')
  // the example service refuses a second client of one user with the same tax_id (409 CLIENT_EXISTS)
  t.same(cliIds.filter((id) => walkthroughIds.includes(id)), [], 'no tax_id in both')
})

t.test('the README is short and its map names every page of docs/', async (t) => {
  const readme = docPage('README.md')
  const lines = readme.split('\n').length
  t.ok(lines <= 200, `README.md has ${lines} lines (at most 200: every other fact has a page in docs/)`)
  const map = readme.slice(readme.indexOf('\n## The docs\n'))
  t.not(map, readme, 'the README has its map of the docs')
  const mapped = new Set([...map.matchAll(/^\| \[[^\]]+\]\(([^)#]+)\) \|/gm)].map((m) => m[1] as string))
  t.same(TOP_PAGES.filter((page) => !mapped.has(page)), [], 'every page of docs/ is on the map')
  // a page of a folder (docs/decision/nginx.md) is linked from a page of the map (docs/decision-mode.md)
  const linkedFromMap = new Set(TOP_PAGES.filter((page) => mapped.has(page)).flatMap((page) =>
    [...docPage(page).matchAll(/\]\(([^)#]+\.md)(?:#[^)]*)?\)/g)].map((m) => `docs/${m[1] as string}`.replace(/\/\.\//g, '/'))))
  t.same(DOC_PAGES.filter((page) => !TOP_PAGES.includes(page) && !linkedFromMap.has(page)), [], 'every page of a docs/ folder is linked from a page on the map')
  t.ok(mapped.has('SECURITY.md') && mapped.has('client/README.md'), 'and SECURITY.md and the client package')
})

t.test('a long page opens with its table of contents: a link to each of its sections', async (t) => {
  for (const page of DOC_PAGES) {
    const lines = proseLines(docPage(page))
    const sections = lines.filter((line) => line.startsWith('## ')).map((line) => line.slice(3).trim())
    if (sections.length < 3) continue
    const opening = lines.slice(0, lines.findIndex((line) => line.startsWith('## '))).join('\n')
    const listed = [...opening.matchAll(/^ *- \[([^\]]+)\]\(#[^)]+\)/gm)].map((m) => m[1] as string)
    t.same(sections.filter((section) => !listed.includes(section)), [], `${page}: its ${sections.length} sections are in its contents`)
  }
})
