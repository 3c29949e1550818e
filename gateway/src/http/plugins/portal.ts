// The developer portal (docs/portal.md) on the public port under its prefix (KEYGATE_PORTAL_PREFIX,
// default /portal): the page at `<prefix>/`, its content-hashed bundles under `<prefix>/assets/`.
// Static files only: every action the page takes goes through keygate's own API with the
// user's bearer token, under the same checks as the CLI's. Every answer under the prefix, a 404
// included, carries the security headers; no cookie is ever set.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { GatewayError } from '../../errors.js'
import { ASSETS_FOLDER, loadPortal, type PortalFile, type PortalFiles } from '../../portal/assets.js'

/**
 * Scripts and styles from this origin only (no inline script or style, no eval), requests to this
 * origin only, no framing, no form posts, no plugins, no <base>.
 */
export const PORTAL_CSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

export const PORTAL_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy': PORTAL_CSP,
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
  'permissions-policy': 'camera=(), microphone=(), geolocation=(), payment=(), usb=()'
}

/** the page: revalidated at each load, so a new release's bundles are picked up at once */
const PAGE_CACHE = 'no-cache'
/** a bundle's name changes with its content */
const ASSET_CACHE = 'public, max-age=31536000, immutable'

export interface PortalOptions {
  prefix: string
  /** the files (tests); default: loadPortal() at the first request */
  files?: () => Promise<PortalFiles>
}

function send (request: FastifyRequest, reply: FastifyReply, file: PortalFile, cacheControl: string): FastifyReply {
  reply.header('cache-control', cacheControl).header('etag', file.etag)
  const known = request.headers['if-none-match']
  if (known !== undefined && known.split(',').some((tag) => tag.trim().replace(/^W\//, '') === file.etag)) return reply.code(304).send()
  return reply.type(file.contentType).send(file.body)
}

const portal: FastifyPluginAsync<PortalOptions> = async (app, { prefix, files = loadPortal }) => {
  let loading: Promise<PortalFiles> | undefined
  const portalFiles = async (): Promise<PortalFiles> => {
    loading ??= files().catch((err: unknown) => {
      // a failed build is retried at the next request, not cached
      loading = undefined
      throw err
    })
    return await loading
  }

  await app.register(async (scope) => {
    scope.addHook('onSend', async (_request, reply, payload) => {
      reply.headers(PORTAL_HEADERS)
      return payload
    })
    scope.get(prefix, { schema: { hide: true } }, async (_request, reply) => await reply.redirect(`${prefix}/`, 308))
    scope.get(`${prefix}/`, { schema: { hide: true } }, async (request, reply) => send(request, reply, (await portalFiles()).page, PAGE_CACHE))
    scope.get(`${prefix}/${ASSETS_FOLDER}/:name`, { schema: { hide: true } }, async (request, reply) => {
      const { name } = request.params as { name: string }
      const file = (await portalFiles()).assets.get(name)
      if (file === undefined) throw new GatewayError('NOT_FOUND', `The portal has no file ${ASSETS_FOLDER}/${name}: load ${prefix}/ again for the current ones`)
      return send(request, reply, file, ASSET_CACHE)
    })
    // anything else under the prefix is the portal's, and not found: never a business route's
    scope.all(`${prefix}/*`, { schema: { hide: true } }, async () => {
      throw new GatewayError('NOT_FOUND', `The portal has no such page: it lives at ${prefix}/`)
    })
  })
}

export const portalPlugin = fp(portal, { name: 'keygate-portal', fastify: '5.x' })
