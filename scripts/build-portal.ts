// `npm run build`, after tsc: the developer portal bundled into dist/portal/, which the compiled
// gateway serves (gateway/src/portal/assets.ts). From the sources it is bundled at run time instead.
import { fileURLToPath } from 'node:url'
import { rm } from 'node:fs/promises'
import { bundlePortal, writePortal } from '../gateway/src/portal/assets.js'

const folder = fileURLToPath(new URL('../dist/portal/', import.meta.url))
await rm(folder, { recursive: true, force: true })
await writePortal(await bundlePortal(), folder)
