// This checkout built once and shared by every test file of a run, and by later runs until a file
// changes: `await compiled('gateway/src/main.ts')` is the path of its JavaScript, which a test
// starts with plain `node` (a child on compiled code starts in a fraction of tsx's time);
// packages.ts packs the same tree. `npm run build` runs in a copy of the checkout (its
// node_modules linked), never in the checkout itself, so no test sees a half-built dist/. The copy
// lives in the temp dir under a name made of a hash of the checkout's path and content: the first
// test file that asks builds it while holding a lock, the others wait for it, whether they run
// side by side in one `tap` run or alone (`npx tap file`). test/ is copied but not hashed: editing
// a test does not rebuild (nothing built or packed comes from test/), but for the recipe, this file
// and dockerfile.ts.
//
// The copy is made as the Dockerfile's build stage makes its tree: first only what that stage's
// COPY lines copy (each file where the checkout has it), where `npm run build` (the stage's RUN)
// runs; then the rest of the checkout is copied in beside the build. So the one build is also the
// image's build stage, which test/system/docker-image.test.ts takes (dockerBuildStage(): the
// stage's files and dist/ as its build left them, before the rest came): the build needs nothing
// the stage does not copy. Where it does need more (or the stage's COPY lines put a file where the
// checkout does not have it), the failure is kept for that test, and the checkout is built again
// whole for the others.
import { execFile } from 'node:child_process'
import { createHash } from 'node:crypto'
import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { copyStage, dockerStages, type Stage } from './dockerfile.js'

export const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const run = promisify(execFile)
/** what a copy of the checkout leaves out: installs, build output, test runs' leftovers */
const NOT_COPIED = new Set(['node_modules', '.git', 'dist', '.tap', 'coverage'])
const CACHE = join(tmpdir(), 'keygate-test-builds')
/** builds of this checkout unused for this long are removed when a new one is made */
const STALE_MS = 60 * 60_000
const POLL_MS = 200
/** in a build, the Dockerfile build stage's tree as its `npm run build` left it (not part of the checkout) */
const DOCKER_STAGE = '.docker-build-stage'
/** in DOCKER_STAGE, why the stage's build failed, when it did */
const DOCKER_FAILURE = 'failure.txt'

/** the checkout's files that a copy holds (or a copy's: `base`), relative to it, sorted */
function checkoutFiles (base = ROOT, dir = base): string[] {
  const files: string[] = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (NOT_COPIED.has(entry.name)) continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) files.push(...checkoutFiles(base, path))
    else if (entry.isFile()) files.push(relative(base, path))
  }
  return files.sort()
}

/** how a build is made: a change to these builds again */
const RECIPE = new Set([join('test', 'helpers', 'build.ts'), join('test', 'helpers', 'dockerfile.ts')])

/** the checkout's path and the content of every copied file outside test/, and of the recipe */
function checkoutHash (): string {
  const hash = createHash('sha256').update(ROOT)
  for (const file of checkoutFiles()) {
    if (file.split(sep)[0] === 'test' && !RECIPE.has(file)) continue
    hash.update(`\0${file}\0`).update(readFileSync(join(ROOT, file)))
  }
  return hash.digest('hex').slice(0, 16)
}

const sleep = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }

function isRunning (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code !== 'ESRCH'
  }
}

function holderIsGone (lock: string): boolean {
  let pid: string
  try {
    pid = readFileSync(join(lock, 'pid'), 'utf8')
  } catch {
    // no pid file yet: the holder has just taken the lock, unless it died doing so a while ago;
    // or no lock any more: the caller tries again
    const since = statSync(lock, { throwIfNoEntry: false })?.mtimeMs
    return since !== undefined && Date.now() - since > 60_000
  }
  return !isRunning(Number(pid))
}

/**
 * `dir`, made by `fill` (given an empty folder) the first time and reused afterwards. Across
 * processes, one fills it while holding `dir`.lock; the others wait. A folder appears complete
 * or not at all: it is filled beside `dir` and renamed into place.
 */
export async function once (dir: string, fill: (into: string) => Promise<void>): Promise<string> {
  mkdirSync(join(dir, '..'), { recursive: true })
  const lock = `${dir}.lock`
  for (;;) {
    if (existsSync(dir)) {
      const now = new Date()
      utimesSync(dir, now, now)
      return dir
    }
    try {
      mkdirSync(lock)
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
      if (holderIsGone(lock)) rmSync(lock, { recursive: true, force: true })
      else await sleep(POLL_MS)
      continue
    }
    const into = `${dir}.${process.pid}`
    try {
      writeFileSync(join(lock, 'pid'), String(process.pid))
      rmSync(into, { recursive: true, force: true })
      mkdirSync(into)
      await fill(into)
      // another process may have got there first (after taking a lock it thought abandoned)
      if (!existsSync(dir)) renameSync(into, dir)
    } finally {
      rmSync(into, { recursive: true, force: true })
      rmSync(lock, { recursive: true, force: true })
    }
  }
}

let built: Promise<string> | undefined

/** The folder of this checkout's build: a copy of the checkout with dist/ (`npm run build`). */
export async function builtCheckout (): Promise<string> {
  built ??= (async () => {
    const [checkout, content] = [createHash('sha256').update(ROOT).digest('hex').slice(0, 8), checkoutHash()]
    const dir = join(CACHE, `${checkout}-${content}`)
    return await once(dir, async (into) => {
      const build = async (what: string): Promise<string | undefined> =>
        await run('npm', ['run', 'build'], { cwd: into, maxBuffer: 16 << 20 }).then(() => undefined,
          (err: Error & { stdout?: string; stderr?: string }) => `npm run build failed in ${what}: ${err.message}\n${err.stdout ?? ''}${err.stderr ?? ''}`)
      symlinkSync(join(ROOT, 'node_modules'), join(into, 'node_modules'), 'dir')
      // the Dockerfile's build stage: its files, its build, kept for docker-image.test.ts
      const stageFailure = await buildDockerStage(into, build)
      if (stageFailure !== undefined) {
        for (const entry of readdirSync(into)) {
          if (entry !== 'node_modules' && entry !== DOCKER_STAGE) rmSync(join(into, entry), { recursive: true, force: true })
        }
      }
      // the rest of the checkout (the stage's files are the checkout's, in their places)
      for (const file of checkoutFiles()) if (!existsSync(join(into, file))) cpSync(join(ROOT, file), join(into, file))
      if (stageFailure !== undefined) {
        const failure = await build('a copy of the checkout')
        if (failure !== undefined) throw new Error(failure)
      }
      // the load tool too, which the package leaves out (a development tool): each file as tsx
      // compiles it (esbuild), to dist/bench/ beside the gateway it imports; the tests run it and its
      // children on plain node, saving each process tsx's half second of loading
      const benchSources = readdirSync(join(into, 'bench')).filter((name) => name.endsWith('.ts')).map((name) => join('bench', name))
      const esbuild = join(ROOT, 'node_modules', '.bin', 'esbuild')
      const flags = ['--outdir=dist/bench', '--format=esm', '--platform=node', '--log-level=warning']
      await run(esbuild, [...benchSources, ...flags], { cwd: into, maxBuffer: 16 << 20 }).catch((err: Error & { stderr?: string }) => {
        throw new Error(`compiling bench/ failed in a copy of the checkout: ${err.message}\n${err.stderr ?? ''}`)
      })
      // and its entry, cli.js, once more as one file with the ES modules it imports (the gateway's
      // configuration, typebox, jose, yaml: some 400 files), which every run of the bench reads
      // and links before it even parses its flags: the most of a usage error's CPU. ioredis and
      // autocannon, CommonJS that finds its own files by __dirname, stay packages it imports; the
      // children it forks (child.js, flood-child.js) stay as compiled above.
      const entry = join('dist', 'bench', 'cli.js')
      await run(esbuild, [
        entry, '--bundle', `--outfile=${entry}`, '--allow-overwrite', ...flags.slice(1), '--external:ioredis', '--external:autocannon',
        // what it bundles of CommonJS asks for Node's own modules with require()
        '--banner:js=import { createRequire as createRequireOfBundle } from \'node:module\'; const require = createRequireOfBundle(import.meta.url);'
      ], { cwd: into, maxBuffer: 16 << 20 }).catch((err: Error & { stderr?: string }) => {
        throw new Error(`bundling bench/cli.ts failed in a copy of the checkout: ${err.message}\n${err.stderr ?? ''}`)
      })
      const bundledBy = /\b__(?:dirname|filename)\b/.exec(readFileSync(join(into, entry), 'utf8'))
      if (bundledBy !== null) throw new Error(`bench/cli.ts bundled: a package in it uses ${bundledBy[0]}, wrong in one file: name it --external in build.ts`)
      // older builds of this checkout nothing has used for a while, and what killed builders left
      for (const name of readdirSync(CACHE)) {
        const other = join(CACHE, name)
        const builder = /\.(\d+)$/.exec(name)?.[1]
        const stale = builder === undefined
          ? !name.includes('.') && Date.now() - (statSync(other, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()) > STALE_MS
          : !isRunning(Number(builder))
        if (name.startsWith(`${checkout}-`) && stale) rmSync(other, { recursive: true, force: true })
      }
    })
  })()
  return await built
}

/** The Dockerfile's stage that runs `npm run build` (a test checks that it does). */
export function dockerBuildStageOf (stages = dockerStages()): Stage | undefined {
  return stages.find((stage) => stage.all('RUN').some((run) => run.args === 'npm run build'))
}

/**
 * Lays the Dockerfile build stage's tree in `into` (its COPY lines from the checkout; the install
 * is the checkout's node_modules, linked already) and runs `build` there; keeps the tree as the
 * build left it in DOCKER_STAGE. The reason it could not, or undefined.
 */
async function buildDockerStage (into: string, build: (what: string) => Promise<string | undefined>): Promise<string | undefined> {
  const kept = join(into, DOCKER_STAGE)
  mkdirSync(kept)
  const fail = (why: string): string => {
    writeFileSync(join(kept, DOCKER_FAILURE), why)
    return why
  }
  const stage = dockerBuildStageOf()
  if (stage === undefined) return fail('the Dockerfile has no stage that runs npm run build')
  try {
    copyStage(stage, into)
  } catch (err) {
    return fail(`the build stage's COPY lines failed: ${(err as Error).message}`)
  }
  const theCheckouts = (file: string): boolean => existsSync(join(ROOT, file)) && readFileSync(join(ROOT, file)).equals(readFileSync(join(into, file)))
  const moved = checkoutFiles(into).filter((file) => file.split(sep)[0] !== DOCKER_STAGE && !theCheckouts(file))
  if (moved.length > 0) {
    return fail(`the build stage's COPY lines put ${moved.join(', ')} where the checkout has no such file: ` +
      'helpers/build.ts builds the stage in the copy of the checkout, so each file must be where the checkout has it')
  }
  const failure = await build('the Dockerfile build stage\'s files (its COPY lines) alone')
  if (failure !== undefined) return fail(failure)
  for (const entry of readdirSync(into)) {
    if (entry !== 'node_modules' && entry !== DOCKER_STAGE) cpSync(join(into, entry), join(kept, entry), { recursive: true })
  }
  return undefined
}

/**
 * The Dockerfile build stage's tree (its WORKDIR) as its `npm run build` left it: made by the shared
 * build (see the top of this file). Throws why the stage did not build, where it did not.
 */
export async function dockerBuildStage (): Promise<string> {
  const kept = join(await builtCheckout(), DOCKER_STAGE)
  const failure = join(kept, DOCKER_FAILURE)
  if (existsSync(failure)) throw new Error(readFileSync(failure, 'utf8'))
  return kept
}

/**
 * The compiled JavaScript of `source` (a .ts file of the checkout that `npm run build` compiles:
 * gateway/src, upstream-stub/src, client/src; or of bench/), to run with plain `node`.
 */
export async function compiled (source: string): Promise<string> {
  const path = join(await builtCheckout(), 'dist', source.replace(/\.ts$/, '.js'))
  if (!existsSync(path)) throw new Error(`${source} is not compiled by npm run build (no ${path})`)
  return path
}
