// `npm run package-sizes`: what `npm pack` makes of keygate and of @keygate/client, measured in
// this checkout now, so that no document has to quote a size that goes stale. It builds first
// (npm run build), as npm pack would, then asks npm for each tarball without writing it.
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { isMainModule } from '../gateway/src/lib/is-main-module.js'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('..', import.meta.url))

export interface PackedSize {
  /** the tarball npm pack writes */
  filename: string
  /** its bytes */
  size: number
  /** the bytes of the files in it */
  unpackedSize: number
  files: number
}

/** The tarballs of keygate and of its client workspace in `dir`, built there already: npm pack --dry-run, no scripts. */
export async function packedSizes (dir: string): Promise<PackedSize[]> {
  const sizes: PackedSize[] = []
  for (const workspace of [[], ['-w', '@keygate/client']]) {
    const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts', ...workspace], { cwd: dir, maxBuffer: 16 << 20 })
    const [packed] = JSON.parse(stdout) as Array<{ filename: string; size: number; unpackedSize: number; entryCount: number }>
    if (packed === undefined) throw new Error(`npm pack --dry-run made nothing: ${stdout}`)
    sizes.push({ filename: packed.filename, size: packed.size, unpackedSize: packed.unpackedSize, files: packed.entryCount })
  }
  return sizes
}

/** One line per tarball, sizes in kB (1000 bytes, as npm counts). */
export function formatSizes (sizes: readonly PackedSize[]): string {
  const kB = (bytes: number): string => `${(bytes / 1000).toFixed(1)} kB`.padStart(9)
  const width = Math.max(...sizes.map((s) => s.filename.length))
  return sizes.map((s) => `${s.filename.padEnd(width)}  ${kB(s.size)} packed, ${kB(s.unpackedSize)} unpacked, ${s.files} files\n`).join('')
}

if (isMainModule(import.meta.url)) {
  await run('npm', ['run', 'build'], { cwd: ROOT, maxBuffer: 16 << 20 })
  process.stdout.write(formatSizes(await packedSizes(ROOT)))
}
