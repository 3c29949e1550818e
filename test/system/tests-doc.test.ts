// docs/tests.md, "Running the tests": each command in its cheapest faithful form. The npm
// scripts are not run from a test (npm test is the whole suite, and the others take minutes):
// each is checked to be what its comment says, and .ci/run runs npm run lint, npm test and npm run
// test:chaos on every submission. The npx tap lines run as `npx tap list` with the same arguments,
// through bash as typed: the files tap would run, without running them.
import { execFile } from 'node:child_process'
import { readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { ROOT } from '../helpers/build.js'
import { docPage, docSnippet } from '../helpers/docs.js'

const run = promisify(execFile)
const block = docSnippet('docs/tests.md', 'Running the tests', 'sh')
const lines = block.split('\n').filter(Boolean).map((line) => line.replace(/ +#.*$/, ''))
const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts

/** the files under `dir` (from the root) whose names end in .test.ts, `deep`: in its folders too */
function testFiles (dir: string, deep: boolean): string[] {
  return readdirSync(join(ROOT, dir), { withFileTypes: true, recursive: deep })
    .filter((entry) => entry.isFile() && entry.name.endsWith('.test.ts'))
    .map((entry) => relative(ROOT, join(entry.parentPath, entry.name))).sort()
}

/** what `npx tap ...` (as typed) would run: `npx tap list ...` with the same arguments */
async function listed (line: string): Promise<string[]> {
  const { stdout } = await run('bash', ['-c', line.replace(/^npx tap /, 'npx tap list ')], { cwd: ROOT, env: { PATH: process.env.PATH ?? '' } })
  return stdout.split('\n').filter(Boolean).sort()
}

t.test('the npm scripts the block names do what its comments say', async (t) => {
  t.same(lines.filter((line) => line.startsWith('npm ')), ['npm test', 'npm run test:fast', 'npm run lint', 'npm run test:chaos'])
  t.equal(scripts.test, 'npm run typecheck && npm run tap:plugins && tap', 'npm test: typecheck, tap\'s plugin set, then every test (tap\'s include)')
  t.equal(scripts['test:fast'], "npm run typecheck && npm run tap:plugins && tap 'test/unit/**/*.test.ts' 'test/security/*.test.ts'",
    'test:fast: typecheck, tap\'s plugin set, unit and security')
  t.equal(scripts['tap:plugins'], 'node --import tsx scripts/tap-plugins.ts', 'tap:plugins: tap build when package.json\'s plugin set is not built')
  t.equal(scripts.lint, 'eslint .', 'lint: the whole repository')
  t.equal(scripts['lint:fix'], 'eslint . --fix', 'and lint:fix')
  t.match(readFileSync(join(ROOT, 'eslint.config.js'), 'utf8'), /neostandard/, 'neostandard')
  t.match(scripts['test:chaos'], /^npm run tap:plugins && tap .*test\/chaos\/\*\.chaos\.ts$/, 'test:chaos: the chaos files')
  t.ok(readdirSync(join(ROOT, 'test/chaos')).some((name) => name.endsWith('.chaos.ts')), 'and there are some')
  const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8')
  for (const command of ['npm run lint', 'npm test', 'npm run test:chaos']) t.match(ci, new RegExp(`^ *${command}\\b`, 'm'), `.ci/run runs ${command}`)
})

t.test('.ci/run runs the browser tests again with the bundled Chromium, as docs/tests.md says: every file that launches one', async (t) => {
  const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8')
  const listed = /^browser_tests=\(([^)]*)\)$/m.exec(ci)?.[1]?.split(' ').sort() ?? []
  const launching = testFiles('test/system', false).filter((file) => /^import \{[^}]*\blaunchChromium\b[^}]*\} from '\.\.\/helpers\/chromium\.js'/m.test(readFileSync(join(ROOT, file), 'utf8')))
  t.same(listed, launching, 'the list: the test files that launch Chromium')
  t.match(ci, /^ *KEYGATE_TEST_BROWSER=bundled npx tap "\$\{browser_tests\[@\]\}"/m, 'run with KEYGATE_TEST_BROWSER=bundled')
  t.ok(ci.indexOf('KEYGATE_TEST_BROWSER=bundled') > ci.indexOf('npm test 2>&1'), 'after the README\'s npm test')
  t.match(ci, /missing\+=\(chromium\)/, 'Debian\'s chromium installed when missing, for npm test')
  const doc = docPage('docs/tests.md')
  for (const file of launching) t.ok(doc.includes(file.replace(/^test\/system\//, '')), `docs/tests.md names ${file}`)
  t.match(doc, /KEYGATE_TEST_BROWSER=bundled npx tap/, 'and the phase\'s command')
})

t.test('the npx tap lines name the files their comments say', async (t) => {
  const taps = lines.filter((line) => line.startsWith('npx tap '))
  t.equal(taps.length, 3)
  const bareFolder = run('bash', ['-c', 'npx tap list test/system'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '' } })
    .then(() => ({ code: 0, stdout: 'it found files', stderr: '' }), (err: { code: number; stdout: string; stderr: string }) => err)
  const [one, folder, deep] = await Promise.all(taps.map(listed))
  t.same(one, ['test/system/e2e.test.ts'], 'one file')
  t.same(folder, testFiles('test/system', false), 'one folder: every test file in it')
  t.same(deep, testFiles('test/unit', true), 'a folder and every folder inside it')
  t.ok((deep?.length ?? 0) > testFiles('test/unit', false).length, '(there are folders inside it)')
  const bare = await bareFolder
  t.match(bare, { code: 1, stdout: '', stderr: /No files found/ }, 'a folder\'s name alone finds no file')
})

t.test('tap:plugins (before tap in npm test) builds nothing when tap\'s plugin set is package.json\'s', async (t) => {
  // this run's tap is built with package.json's set (tap builds it itself on a first `npx tap`),
  // so the script only compares; after npm ci on a fresh clone it runs `tap build`, once
  const { stdout, stderr } = await run(process.execPath, ['--import', 'tsx', 'scripts/tap-plugins.ts'], { cwd: ROOT })
  t.equal(stdout + stderr, '', 'nothing built, nothing said')
})
