// keygate's packages as a user gets them: packed by `npm pack` from this checkout's build (build.ts:
// built once per run, in a copy, so the checkout itself is never written to), then installed from
// the tarball into a scratch project outside the repository. A tarball, like the build, is made
// once and shared: read it, do not change it.
import { execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { promisify } from 'node:util'
import { builtCheckout, once } from './build.js'

const run = promisify(execFile)

interface Teardown { teardown: (fn: () => unknown) => void }

export interface Staged {
  /** the built copy of the checkout (shared: read only) */
  dir: string
  /** `npm pack` of the package (the root, keygate, or a workspace) */
  pack: (workspace?: string) => Promise<Packed>
}

export interface Packed {
  /** the tarball's path */
  path: string
  /** the paths of the files in it, relative to the package */
  files: string[]
}

/** `npm pack` of the root package (keygate) or of `workspace`, from the build; made once. */
export async function packed (workspace?: string): Promise<Packed> {
  const build = await builtCheckout()
  const out = await once(join(`${build}-packs`, (workspace ?? 'keygate').replace(/[^a-z0-9-]/gi, '_')), async (into) => {
    // --ignore-scripts: built already, no need for prepack to build again
    const args = ['pack', '--json', '--ignore-scripts', '--pack-destination', into, ...(workspace === undefined ? [] : ['-w', workspace])]
    const { stdout } = await run('npm', args, { cwd: build })
    const [made] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>
    if (made === undefined) throw new Error(`npm pack made nothing: ${stdout}`)
    writeFileSync(join(into, 'packed.json'), JSON.stringify({ filename: made.filename, files: made.files.map((file) => file.path) }))
  })
  const { filename, files } = JSON.parse(readFileSync(join(out, 'packed.json'), 'utf8')) as { filename: string; files: string[] }
  return { path: join(out, filename), files }
}

/** The build and its packs (`t` is no longer needed: nothing of it is the test's to remove). */
export async function stageBuild (_t?: Teardown, _workspace?: string): Promise<Staged> {
  return { dir: await builtCheckout(), pack: packed }
}

/**
 * A new project outside the repository with `tarball` installed as a user installs it
 * (`npm install <tarball>`, here with `--omit=dev`); dependencies come from the npm cache when
 * they are there, else the registry.
 */
export async function installInScratch (t: Teardown, tarball: string, flags: string[] = []): Promise<string> {
  const project = mkdtempSync(join(tmpdir(), 'keygate-user-'))
  t.teardown(() => { rmSync(project, { recursive: true, force: true }) })
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'scratch', version: '1.0.0', private: true }))
  await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', ...flags, tarball], { cwd: project, maxBuffer: 16 << 20 })
  return project
}

/** A `node` on PATH (outside any node_modules) of another version than this one: the system's Node.js 20 here. */
export async function otherNode (): Promise<{ path: string; version: string } | undefined> {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '' || dir.split(/[\\/]/).includes('node_modules')) continue
    const candidate = join(dir, 'node')
    if (!existsSync(candidate)) continue
    const version = await run(candidate, ['--version']).then(({ stdout }) => stdout.trim(), () => undefined)
    if (version !== undefined && version !== process.version) return { path: candidate, version }
  }
  return undefined
}
