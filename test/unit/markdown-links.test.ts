// The documentation stands on its own: every link in the repository's Markdown (README.md,
// SECURITY.md, docs/, client/README.md, ...) leads to a file of this repository (and to a heading
// in it, when it names one), never to another site or outside the checkout, so it reads the same
// offline, in a fork and in a tarball. Code blocks and code spans are examples, not links
// (http://127.0.0.1:8080 there is fine). The pages the code names in what it prints (hints, the
// OpenAPI description) exist too, with the heading they name.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs'
import { dirname, join, relative, resolve, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
/** Folders of no document of ours: installed packages, build output, test reports. */
const SKIPPED = new Set(['node_modules', 'dist', 'coverage', '.git', '.tap'])

/** The files under `dir` (relative to the repository) whose names end in one of `endings`, skipping SKIPPED folders. */
function filesUnder (dir: string, endings: string[]): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true }).flatMap((entry) => {
    const path = dir === '' ? entry.name : `${dir}/${entry.name}`
    if (entry.isDirectory()) return SKIPPED.has(entry.name) ? [] : filesUnder(path, endings)
    return endings.some((ending) => entry.name.endsWith(ending)) ? [path] : []
  })
}

const DOCUMENTS = filesUnder('', ['.md'])

/** The Markdown outside fenced code blocks, code spans and HTML comments: where links are links. */
function prose (markdown: string): string {
  return markdown
    .replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '')
    .replace(/<!--[\s\S]*?-->/g, '')
    .replace(/(`+)[\s\S]*?\1/g, '')
}

/** Every link target: inline links and images, reference definitions, autolinks and bare URLs (GitHub links those too). */
function linkTargets (markdown: string): string[] {
  const text = prose(markdown)
  return [...new Set([
    ...[...text.matchAll(/\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1] as string),
    ...[...text.matchAll(/^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)/gm)].map((m) => m[1] as string),
    ...[...text.matchAll(/<([a-z][a-z0-9+.-]*:[^>\s]*)>/gi)].map((m) => m[1] as string),
    ...[...text.matchAll(/(?<![(<\w])((?:https?|ftp):\/\/[^\s)>\]]+|www\.[^\s)>\]]+)/gi)].map((m) => (m[1] as string).replace(/[.,;:!?]+$/, ''))
  ])]
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes. */
function slug (heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\s_-]/gu, '').replace(/\s/g, '-')
}

/** The Markdown outside fenced code blocks and HTML comments: where headings are headings (code spans stay: they are part of one). */
function withoutBlocks (markdown: string): string {
  return markdown
    .replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[ \t]*$/gm, '')
    .replace(/<!--[\s\S]*?-->/g, '')
}

function anchorsOf (markdown: string): Set<string> {
  const seen = new Map<string, number>()
  const anchors = new Set<string>()
  for (const [, heading] of withoutBlocks(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = slug(heading as string)
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    anchors.add(count === 0 ? base : `${base}-${count}`)
  }
  return anchors
}

/** What is wrong with one link of `document`, or undefined when it leads somewhere in the repository. */
function problemWith (document: string, target: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('//') || /^www\./i.test(target)) return 'leads outside the repository'
  const [path = '', anchor] = target.split('#', 2)
  const file = path === '' ? join(ROOT, document) : resolve(ROOT, dirname(document), decodeURIComponent(path))
  if (relative(ROOT, file).startsWith(`..${sep}`) || relative(ROOT, file) === '..') return 'leads outside the repository'
  if (!existsSync(file)) return `names ${relative(ROOT, file)}, which does not exist`
  if (anchor !== undefined && anchor !== '' && statSync(file).isFile() && file.endsWith('.md') &&
    !anchorsOf(readFileSync(file, 'utf8')).has(decodeURIComponent(anchor))) {
    return `names #${anchor}, which is no heading of ${relative(ROOT, file)}`
  }
  return undefined
}

t.test('the link finder sees links and only links', async (t) => {
  const sample = [
    'See [the guide](docs/a.md#x), ![a chart](docs/b.svg "title"), <https://example.com/a> and https://example.org.',
    '[ref]: http://example.net/ref',
    'In code: `curl http://127.0.0.1:8080/healthz` and `[x](http://in.code)`.',
    '```sh',
    'curl -s http://127.0.0.1:8080/v1/time   # [y](https://in.block)',
    '```',
    '<!-- [z](https://in.comment) -->'
  ].join('\n')
  t.same(linkTargets(sample).sort(), ['docs/a.md#x', 'docs/b.svg', 'http://example.net/ref', 'https://example.com/a', 'https://example.org'].sort())
  t.equal(slug('Keys: list, revoke, expire, rotate'), 'keys-list-revoke-expire-rotate')
  t.equal(slug('Debugging `INVALID_SIGNATURE`'), 'debugging-invalid_signature')
  t.equal(problemWith('README.md', 'https://nodejs.org/api/cluster.html'), 'leads outside the repository')
  t.equal(problemWith('README.md', '../shared/SPEC.md'), 'leads outside the repository')
  t.match(problemWith('README.md', 'docs/nothing-here.md'), /does not exist/)
  t.match(problemWith('README.md', '#no-such-heading'), /no heading of README\.md/)
  t.equal(problemWith('README.md', '#try-it-in-two-minutes'), undefined)
  t.equal(problemWith('docs/cli.md', 'getting-started.md#the-package-and-the-keygate-command'), undefined, 'a heading with a code span')
  t.equal(problemWith('docs/scaling.md', '../SECURITY.md'), undefined)
})

t.test('every link in the documentation leads to a file of the repository', async (t) => {
  for (const page of ['README.md', 'SECURITY.md', 'client/README.md', 'docs/debugging-signatures.md', 'docs/signing.md']) {
    t.ok(DOCUMENTS.includes(page), `${page} is read`)
  }
  t.notOk(DOCUMENTS.some((document) => document.split('/').includes('node_modules')), 'installed packages are not')
  for (const document of DOCUMENTS) {
    const targets = linkTargets(readFileSync(join(ROOT, document), 'utf8'))
    const broken = targets.flatMap((target) => {
      const problem = problemWith(document, target)
      return problem === undefined ? [] : [`${target}: ${problem}`]
    })
    t.same(broken, [], `${document}: ${targets.length} links`)
  }
})

/** The pages of this repository a source file names (README.md, SECURITY.md, docs/...md), with the heading when it names one. */
function pagesNamedIn (source: string): string[] {
  return [...new Set([...source.matchAll(/(?<![\w/.-])((?:README|SECURITY)\.md|docs\/[\w/-]+\.md)(#[\w-]+)?/g)].map((m) => m[0]))]
}

t.test('the page finder sees pages, with their headings, and only pages', async (t) => {
  t.same(pagesNamedIn("'see docs/configuration.md)', `docs/signing.md#keys`, // README.md, client/README.md, xdocs/a.md"),
    ['docs/configuration.md', 'docs/signing.md#keys', 'README.md'])
})

t.test('every page the code names, in what it prints and in its comments, exists, with the heading it names', async (t) => {
  const sources = ['gateway/src', 'client/src', 'upstream-stub/src', 'bench', 'scripts'].flatMap((dir) => filesUnder(dir, ['.ts']))
  const named = sources.flatMap((file) => pagesNamedIn(readFileSync(join(ROOT, file), 'utf8')).map((page) => ({ file, page })))
  t.ok(named.some(({ page }) => page === 'docs/configuration.md'), 'the CLI\'s hints are read')
  for (const { file, page } of named) t.equal(problemWith('README.md', page), undefined, `${file} names ${page}`)
  const vague = sources.flatMap((file) => [...readFileSync(join(ROOT, file), 'utf8').matchAll(/\bthe README\b(?! walkthrough)/g)].map(() => file))
  t.same(vague, [], 'a source names the page it means, not "the README" (its walkthrough excepted)')
})
