import { realpathSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import type { FastifyInstance } from 'fastify'
import { buildUpstreamApp, type UpstreamAppOptions } from './app.js'
import { identityTokenFromEnv } from './identity-token.js'

export interface StartUpstreamOptions {
  /** 0 picks a free port; read the real one from `url`. */
  port: number
  host: string
  logger?: UpstreamAppOptions['logger']
  identityToken?: UpstreamAppOptions['identityToken']
}

export interface RunningUpstream {
  app: FastifyInstance
  /** e.g. `http://127.0.0.1:8081` */
  url: string
  close: () => Promise<void>
}

/**
 * Build and listen. Signal handling is left to the caller, so a launcher that
 * runs several services can shut them down in its own order.
 */
export async function startUpstream ({ port, host, logger, identityToken }: StartUpstreamOptions): Promise<RunningUpstream> {
  const app = await buildUpstreamApp({ logger, identityToken })
  // fastify logs "Server listening at ..." itself when the logger is on.
  const url = await app.listen({ port, host })
  return { app, url, close: () => app.close() }
}

function parsePort (raw: string | undefined, fallback: number): number {
  if (raw === undefined || raw === '') return fallback
  const port = Number(raw)
  if (!/^[0-9]+$/.test(raw) || port > 65535) {
    throw new Error(`UPSTREAM_PORT must be an integer from 0 to 65535, got "${raw}"`)
  }
  return port
}

async function main (): Promise<void> {
  const upstream = await startUpstream({
    port: parsePort(process.env['UPSTREAM_PORT'], 8081),
    host: process.env['HOST'] || '127.0.0.1',
    logger: true,
    // Spelled out, not `process.env` passed whole: test/deploy checks that the
    // compose file sets only variables named in this file.
    identityToken: identityTokenFromEnv({
      UPSTREAM_JWKS_URL: process.env['UPSTREAM_JWKS_URL'],
      UPSTREAM_IDENTITY_HEADER: process.env['UPSTREAM_IDENTITY_HEADER'],
      UPSTREAM_IDENTITY_ISSUER: process.env['UPSTREAM_IDENTITY_ISSUER'],
      UPSTREAM_IDENTITY_AUDIENCE: process.env['UPSTREAM_IDENTITY_AUDIENCE'],
    }),
  })

  let closing = false
  const shutdown = (signal: NodeJS.Signals): void => {
    // A second signal while draining means the operator wants out now.
    if (closing) process.exit(1)
    closing = true
    upstream.app.log.info({ signal }, 'shutting down')
    // On success nothing is left on the event loop, so the process exits 0 by itself.
    upstream.close().catch((err: unknown) => {
      upstream.app.log.error({ err }, 'shutdown failed')
      process.exit(1)
    })
  }
  process.on('SIGINT', shutdown)
  process.on('SIGTERM', shutdown)
}

/**
 * True when this file is the process entry (node --import tsx .../server.ts)
 * rather than imported by scripts/start.ts or tests. realpath because argv[1]
 * may go through a symlink while import.meta.url is always resolved.
 */
function isMainModule (): boolean {
  const entry = process.argv[1]
  if (entry === undefined) return false
  try {
    return realpathSync(entry) === fileURLToPath(import.meta.url)
  } catch {
    return false
  }
}

if (isMainModule()) {
  main().catch((err: unknown) => {
    console.error(err)
    process.exit(1)
  })
}
