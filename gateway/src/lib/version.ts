import { readFileSync } from 'node:fs'

/** keygate's version, from its package.json (read once, when first asked) */
let version: string | undefined
export function keygateVersion (): string {
  version ??= (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version
  return version
}
