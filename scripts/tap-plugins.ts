// Before tap runs (npm test, test:fast, test:chaos): build tap's plugin set when it is not the one
// package.json's "tap" block names. npm ci installs tap with its default set, which loads
// TypeScript's ts-node in every test process; tap rebuilds on its own when the sets differ, but only
// after it has chosen its test processes' loaders from the set it was installed with, so on a fresh
// clone's first run every test file would still load ts-node (~0.4 s of CPU each, though tsx runs
// them). `tap build` here, once, makes the first run as fast as the next ones; later runs only compare.
import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { TapConfig } from '@tapjs/config'
import { signature } from '@tapjs/test'

const config = await TapConfig.load()
if (config.pluginSignature !== signature) {
  console.error('tap-plugins: building tap\'s plugin set of package.json (npx tap build), once after npm ci')
  const built = spawnSync(fileURLToPath(new URL('../node_modules/.bin/tap', import.meta.url)), ['build'], { stdio: ['ignore', 'ignore', 'inherit'] })
  if (built.status !== 0) {
    console.error(`tap-plugins: npx tap build failed (${built.error?.message ?? `exit ${built.status ?? built.signal}`})`)
    process.exit(1)
  }
}
