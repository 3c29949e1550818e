// keygate's packages as a user gets them: built and packed from a copy of this checkout (the
// checkout itself is never written to, so tests that run beside this one see no half-built dist/),
// then installed from the tarball into a scratch project outside the repository.
import { execFile } from 'node:child_process'
import { cpSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const run = promisify(execFile)
/** what a copy of the checkout leaves out: installs, build output, test runs' leftovers */
const NOT_COPIED = new Set(['node_modules', '.git', 'dist', '.tap', 'coverage'])

interface Teardown { teardown: (fn: () => unknown) => void }

export interface Staged {
  /** the copy of the checkout, built */
  dir: string
  /** `npm pack` of the package (the root, keygate, or a workspace) into a folder of its own */
  pack: (workspace?: string) => Promise<Packed>
}

export interface Packed {
  /** the tarball's path */
  path: string
  /** the paths of the files in it, relative to the package */
  files: string[]
}

/**
 * Copies the checkout (its node_modules linked, not copied) and runs `npm run build` there: for
 * every package, or for `workspace` only.
 */
export async function stageBuild (t: Teardown, workspace?: string): Promise<Staged> {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-stage-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  cpSync(ROOT, dir, {
    recursive: true,
    filter: (source) => !relative(ROOT, source).split(sep).some((part) => NOT_COPIED.has(part))
  })
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir')
  await run('npm', ['run', 'build', ...(workspace === undefined ? [] : ['-w', workspace])], { cwd: dir, maxBuffer: 16 << 20 })
  return {
    dir,
    pack: async (workspace) => {
      const out = mkdtempSync(join(tmpdir(), 'keygate-pack-'))
      t.teardown(() => { rmSync(out, { recursive: true, force: true }) })
      // --ignore-scripts: built above, no need for prepack to build again
      const args = ['pack', '--json', '--ignore-scripts', '--pack-destination', out, ...(workspace === undefined ? [] : ['-w', workspace])]
      const { stdout } = await run('npm', args, { cwd: dir })
      const [packed] = JSON.parse(stdout) as Array<{ filename: string; files: Array<{ path: string }> }>
      if (packed === undefined) throw new Error(`npm pack made nothing: ${stdout}`)
      return { path: join(out, packed.filename), files: packed.files.map((file) => file.path) }
    }
  }
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
