// The rooms stay small enough to find one's way in: no source file over MAX_FILE_LINES lines and no
// function over MAX_FUNCTION_LINES (measured from its first line to its last, what it holds
// included), unless the file says at its top why it is clearer whole: a line of its opening
// comment that starts `// Size:` and gives the reason. A reason in a file that no longer needs
// one fails too, so that none outlives what it excused. Functions are found with TypeScript's
// own parser. test/ is not measured.
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import ts from 'typescript'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const SOURCE_ROOTS = ['gateway/src', 'gateway/portal/src', 'client/src', 'upstream-stub/src', 'bench', 'scripts']
const SOURCE_FILE = /\.(?:[cm]?ts|tsx|[cm]?js)$/
const MAX_FILE_LINES = 500
const MAX_FUNCTION_LINES = 120
/** a reason is a sentence, not a word: at least this many characters */
const MIN_REASON_LENGTH = 20

/** lines as `wc -l` counts them */
const lineCount = (text: string): number => text.split('\n').length - (text.endsWith('\n') ? 1 : 0)

/**
 * The `// Size:` reason of the file's opening comment (its first lines, up to the first that is
 * neither a comment nor blank), continued on the comment lines below it; undefined when none.
 */
function sizeReason (text: string): string | undefined {
  const opening: string[] = []
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#!')) continue
    if (!line.startsWith('//')) break
    opening.push(line)
  }
  const at = opening.findIndex((line) => line.startsWith('// Size:'))
  if (at === -1) return undefined
  const rest = opening.slice(at + 1)
  // the reason runs on to the end of the comment, a bare `//`, or another `Label:` line
  const end = rest.findIndex((line) => !line.startsWith('// ') || /^\/\/ [A-Z][a-z]*:/.test(line))
  return [opening[at] as string, ...rest.slice(0, end === -1 ? rest.length : end)]
    .map((line) => line.replace(/^\/\/ (?:Size:)?/, '').trim()).join(' ').trim()
}

function functionName (node: ts.FunctionLikeDeclaration, file: ts.SourceFile): string {
  if (node.name !== undefined) return node.name.getText(file)
  if (ts.isConstructorDeclaration(node)) return 'constructor'
  const parent = node.parent
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name !== undefined) {
    return parent.name.getText(file)
  }
  return '(anonymous function)'
}

/** The file's functions over `maxLines` lines: `name (N lines, line L)`. */
function longFunctions (path: string, text: string, maxLines = MAX_FUNCTION_LINES): string[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true)
  const lineOf = (pos: number): number => file.getLineAndCharacterOfPosition(pos).line + 1
  const found: string[] = []
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const first = lineOf(node.getStart(file))
      const lines = lineOf(node.getEnd()) - first + 1
      if (lines > maxLines) found.push(`${functionName(node as ts.FunctionLikeDeclaration, file)} (${lines} lines, line ${first})`)
    }
    ts.forEachChild(node, visit)
  }
  visit(file)
  return found
}

/** What is over the bounds in one file, each named with its size. */
function oversized (path: string, text: string): string[] {
  const lines = lineCount(text)
  return [
    ...(lines > MAX_FILE_LINES ? [`the file (${lines} lines)`] : []),
    ...longFunctions(path, text).map((what) => `function ${what}`)
  ]
}

const sources = SOURCE_ROOTS.flatMap((dir) => readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: true })
  .filter((entry) => entry.isFile() && SOURCE_FILE.test(entry.name) && !entry.parentPath.split('/').includes('node_modules'))
  .map((entry) => relative(ROOT, join(entry.parentPath, entry.name))))
  .sort()

t.test('the measure itself: a file or function one line over is named with its size, one at the bound is not', async (t) => {
  const fn = (name: string, lines: number): string => `function ${name} () {\n${'  f()\n'.repeat(lines - 2)}}\n`
  t.same(longFunctions('x.ts', fn('atTheBound', 120)), [])
  t.same(longFunctions('x.ts', fn('over', 121)), ['over (121 lines, line 1)'])
  t.same(longFunctions('x.ts', `// a comment\nexport const arrow = () => {\n${'  f()\n'.repeat(119)}}\n`), ['arrow (121 lines, line 2)'])
  t.same(longFunctions('x.ts', `const o = {\n  method () {\n${'    f()\n'.repeat(119)}  }\n}\n`), ['method (121 lines, line 2)'])
  // an outer function holds its inner ones' lines
  t.same(longFunctions('x.ts', `function outer () {\n${fn('inner', 110)}${'  f()\n'.repeat(10)}}\n`), ['outer (122 lines, line 1)'])
  t.same(oversized('x.ts', 'f()\n'.repeat(500)), [])
  t.same(oversized('x.ts', 'f()\n'.repeat(501)), ['the file (501 lines)'])
})

t.test('the reason: a `// Size:` line of the opening comment, continued on the lines under it', async (t) => {
  t.equal(sizeReason('// What this is.\n// Size: one table, clearer whole than\n// in pieces.\nimport x from \'y\'\n'),
    'one table, clearer whole than in pieces.')
  t.equal(sizeReason('// Size: one table, clearer whole than in pieces.\n// Other: not the reason\n'), 'one table, clearer whole than in pieces.')
  t.equal(sizeReason('import x from \'y\'\n// Size: too late: not the opening comment\n'), undefined)
  t.equal(sizeReason('// nothing said\nconst a = 1\n'), undefined)
})

t.test(`no source file over ${MAX_FILE_LINES} lines nor function over ${MAX_FUNCTION_LINES} without a reason at its top`, async (t) => {
  t.ok(sources.length > 100, `the source files are found (${sources.length})`)
  const unexcused: string[] = []
  const thinReasons: string[] = []
  const staleReasons: string[] = []
  for (const path of sources) {
    const text = readFileSync(join(ROOT, path), 'utf8')
    const over = oversized(path, text)
    const reason = sizeReason(text)
    if (reason === undefined) unexcused.push(...over.map((what) => `${path}: ${what}`))
    else if (reason.length < MIN_REASON_LENGTH) thinReasons.push(`${path}: "// Size: ${reason}"`)
    else if (over.length === 0) staleReasons.push(path)
  }
  t.same(unexcused, [], 'split by concern, or say at the top of the file, on a line starting `// Size:`, why it is clearer whole')
  t.same(thinReasons, [], `a reason says why, in at least ${MIN_REASON_LENGTH} characters`)
  t.same(staleReasons, [], 'these are within the bounds now: drop their `// Size:` reason')
})
