#!/usr/bin/env node
// The `keygate` command (package.json "bin"). Plain JavaScript: it runs before anything is
// compiled or loaded.
//   - In a checkout (the TypeScript sources beside it and tsx installed: `npx keygate` after
//     npm ci, nothing built) it runs the sources as `npm run keygate` does, node
//     --conditions=keygate-source --import tsx, in a child that has the terminal. SIGTERM and
//     SIGHUP sent to this process are passed on to it; Ctrl-C reaches it from the terminal. This
//     process exits as the child does.
//   - Installed from the package (no sources, no tsx) it runs the compiled CLI, dist/, in this very
//     process: `keygate serve` is the gateway itself and handles its own signals.
// A checkout with a dist/ of its own still runs the sources: a build left over from an older
// commit is never what `npx keygate` runs.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { constants } from 'node:os'
import { fileURLToPath } from 'node:url'

const source = fileURLToPath(new URL('../gateway/src/cli/keygate.ts', import.meta.url))
const compiled = new URL('../dist/gateway/src/cli/keygate.js', import.meta.url)
const args = process.argv.slice(2)

/** tsx's loader, when the checkout's dev dependencies are installed */
function tsxLoader () {
  try {
    return import.meta.resolve('tsx')
  } catch {
    return undefined
  }
}

const tsx = existsSync(source) ? tsxLoader() : undefined
if (tsx !== undefined) {
  const child = spawn(process.execPath, ['--conditions=keygate-source', '--import', tsx, source, ...args], { stdio: 'inherit' })
  for (const signal of ['SIGTERM', 'SIGHUP']) process.on(signal, () => { child.kill(signal) })
  // Ctrl-C: the terminal sends SIGINT to the child as well; passed on, it would be the child's second
  process.on('SIGINT', () => {})
  child.once('error', (err) => {
    process.stderr.write(`keygate: ${err.message}\n`)
    process.exit(1)
  })
  child.once('exit', (code, signal) => { process.exit(code ?? 128 + (constants.signals[signal] ?? 0)) })
} else if (existsSync(compiled)) {
  const { main } = await import(compiled.href)
  main(args)
} else {
  process.stderr.write(existsSync(source)
    ? 'keygate: in a checkout, run npm ci first (the sources run through tsx, a dev dependency), or npm run build\n'
    : `keygate: ${fileURLToPath(compiled)} is missing: reinstall the keygate package\n`)
  process.exit(1)
}
