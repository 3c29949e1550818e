import { readFileSync } from 'node:fs'

/**
 * keygate's version, from its package.json (read once, when first asked). This file runs as
 * gateway/src/lib/version.ts in a checkout and as dist/gateway/src/lib/version.js when compiled,
 * so the package.json is the nearest one above it that names keygate.
 */
let version: string | undefined
export function keygateVersion (): string {
  version ??= readVersion()
  return version
}

function readVersion (): string {
  for (let dir = new URL('./', import.meta.url); ; dir = new URL('../', dir)) {
    let text: string | undefined
    try {
      text = readFileSync(new URL('package.json', dir), 'utf8')
    } catch {}
    const manifest = text === undefined ? undefined : JSON.parse(text) as { name?: string; version?: string }
    if (manifest?.name === 'keygate' && typeof manifest.version === 'string') return manifest.version
    if (dir.pathname === '/') throw new Error(`no package.json of keygate above ${import.meta.url}`)
  }
}
