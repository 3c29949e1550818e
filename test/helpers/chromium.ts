// The one place the browser tests get Chromium, so `npm ci && npm test` needs no system browser:
// CHROMIUM_PATH when set; else Debian's /usr/bin/chromium when installed; else the Chromium that
// @sparticuz/chromium ships inside its npm package. KEYGATE_TEST_BROWSER=bundled skips the first
// two, so the bundled path can be tested on a machine that has a system Chromium.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, readFile, rename, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import puppeteer, { type Browser } from 'puppeteer-core'

const SYSTEM_CHROMIUM = '/usr/bin/chromium'

// root in CI containers: Chromium's sandbox needs user namespaces it may not have
const TEST_ARGS = ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run', '--no-default-browser-check']

export interface ChromiumChoice {
  executablePath: string
  args: string[]
  headless: true | 'shell'
  source: 'CHROMIUM_PATH' | 'system' | 'bundled'
}

/** Which Chromium the browser tests use, and with which flags. */
export async function resolveChromium (): Promise<ChromiumChoice> {
  const wanted = process.env.KEYGATE_TEST_BROWSER ?? ''
  if (wanted !== '' && wanted !== 'bundled') {
    throw new Error(`KEYGATE_TEST_BROWSER=${wanted}: the only value is "bundled" (unset, the system Chromium is preferred)`)
  }
  if (wanted !== 'bundled') {
    const fromEnv = process.env.CHROMIUM_PATH
    if (fromEnv !== undefined && fromEnv !== '') {
      // Said explicitly, so no silent fallback to another browser.
      if (!existsSync(fromEnv)) throw new Error(`CHROMIUM_PATH=${fromEnv} does not exist`)
      return { executablePath: fromEnv, args: TEST_ARGS, headless: true, source: 'CHROMIUM_PATH' }
    }
    if (existsSync(SYSTEM_CHROMIUM)) return { executablePath: SYSTEM_CHROMIUM, args: TEST_ARGS, headless: true, source: 'system' }
  }
  const { default: chromium } = await import('@sparticuz/chromium')
  // The package's flags (built for a headless shell), with ours winning where both set a flag.
  const ours = new Set(TEST_ARGS.map(flagName))
  const args = [...chromium.args.filter((arg) => !ours.has(flagName(arg))), ...TEST_ARGS]
  return { executablePath: await unpackBundled(), args, headless: 'shell', source: 'bundled' }
}

/** Headless Chromium; throws saying which browser failed and why, never for want of one. */
export async function launchChromium (): Promise<Browser> {
  const choice = await resolveChromium()
  try {
    return await puppeteer.launch({ executablePath: choice.executablePath, args: choice.args, headless: choice.headless, timeout: 60_000 })
  } catch (err) {
    const hint = choice.source === 'bundled'
      ? 'the bundled Chromium needs the system\'s libnss3 and libnspr4 (Debian: apt-get install libnss3)'
      : 'KEYGATE_TEST_BROWSER=bundled uses the Chromium in node_modules instead'
    throw new Error(`Chromium (${choice.source}, ${choice.executablePath}) did not start: ${err instanceof Error ? err.message : String(err)}; ${hint}`)
  }
}

function flagName (arg: string): string {
  return arg.split('=', 1)[0] ?? arg
}

/**
 * The package's Chromium, decompressed once per version into its own directory under the temp dir.
 * Left to itself the package writes to the temp dir's top level (/tmp/chromium) and reuses any file
 * there: a half-written one from a concurrent or killed run, or another project's other version.
 * So it runs in a child whose TMPDIR is a fresh staging directory, which is then renamed into place
 * whole; of two concurrent first runs one rename wins and the other's copy is dropped.
 */
async function unpackBundled (): Promise<string> {
  const entry = import.meta.resolve('@sparticuz/chromium')
  const { version } = JSON.parse(await readFile(new URL('../../package.json', entry), 'utf8')) as { version: string }
  const dir = join(tmpdir(), `keygate-chromium-${version}`)
  const binary = join(dir, 'chromium')
  if (existsSync(binary)) return binary
  const staging = await mkdtemp(`${dir}.partial-`)
  try {
    const unpacked = await runUnpack(entry, staging)
    if (unpacked !== join(staging, 'chromium')) throw new Error(`@sparticuz/chromium unpacked to ${unpacked}, not into ${staging}`)
    await rename(staging, dir)
  } catch (err) {
    await rm(staging, { recursive: true, force: true })
    if (!existsSync(binary)) throw err
  }
  return binary
}

async function runUnpack (entry: string, staging: string): Promise<string> {
  const script = 'const { default: chromium } = await import(process.argv[1]); process.stdout.write(await chromium.executablePath())'
  const child = spawn(process.execPath, ['--input-type=module', '-e', script, entry], {
    env: { ...process.env, TMPDIR: staging },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  let errors = ''
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => { out += chunk })
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => { errors += chunk })
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject)
    child.once('close', resolve)
  })
  if (code !== 0) throw new Error(`unpacking @sparticuz/chromium failed (exit ${String(code)}): ${errors.trim()}`)
  return out
}
