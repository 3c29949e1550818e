// The developer portal (docs/portal.md) on the public port under its prefix (KEYGATE_PORTAL_PREFIX,
// default /portal): the page at `<prefix>/`, its content-hashed bundles under `<prefix>/assets/`.
// Static files, and every action the page takes goes through keygate's own API with the user's
// bearer token, under the same checks as the CLI's. Every answer under the prefix, a 404
// included, carries the security headers.
//
// With an issuer that logs the portal in (idp/portal-login.ts), the login's own endpoints under
// `<prefix>/oidc/`: the page's links navigate to `start`, the IdP sends the browser back to
// `callback`, and the page takes its token from `session`. They set one cookie, and only one:
// `keygate_login`, a random value that ties the callback and the session to the browser that
// began the login (HttpOnly, SameSite=Lax, Path=<prefix>/oidc/, Max-Age=600, Secure over https).
// It holds no token and is cleared when the page takes its token. No other cookie is ever set.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { Type } from '@sinclair/typebox'
import { GatewayError } from '../../errors.js'
import { LOGIN_STATE_TTL_MS, RANDOM_VALUE, type PortalLogin } from '../../idp/portal-login.js'
import { addressBucket } from '../../lib/client-address.js'
import { isPlainAuthority } from '../../lib/http-headers.js'
import { ASSETS_FOLDER, loadPortal, type PortalFile, type PortalFiles } from '../../portal/assets.js'
import type { Store } from '../../store/index.js'

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
  /** the login through identity providers, when an issuer has portalLogin; with the store its starts are counted in */
  login?: { service: PortalLogin; store: Store }
}

/** the login cookie's name: a binding value, no token */
export const LOGIN_COOKIE = 'keygate_login'
/** logins begun, and callbacks, per client address (an IPv6 /64 counts as one) per minute, each; beyond: 429 */
export const LOGIN_STARTS_PER_MINUTE = 30

const SessionRequest = Type.Object({ handoff: Type.String({ pattern: RANDOM_VALUE.source, description: 'the handoff id of the callback\'s redirect' }) },
  { additionalProperties: false })

/** the login cookie's value, when the request carries exactly one well-formed one */
function loginCookie (request: FastifyRequest): string | undefined {
  const header = request.headers.cookie
  if (header === undefined) return undefined
  const values = header.split(';').map((pair) => pair.trim()).filter((pair) => pair.startsWith(`${LOGIN_COOKIE}=`))
    .map((pair) => pair.slice(LOGIN_COOKIE.length + 1))
  return values.length === 1 && RANDOM_VALUE.test(values[0] as string) ? values[0] : undefined
}

function send (request: FastifyRequest, reply: FastifyReply, file: PortalFile, cacheControl: string): FastifyReply {
  reply.header('cache-control', cacheControl).header('etag', file.etag)
  const known = request.headers['if-none-match']
  if (known !== undefined && known.split(',').some((tag) => tag.trim().replace(/^W\//, '') === file.etag)) return reply.code(304).send()
  return reply.type(file.contentType).send(file.body)
}

const portal: FastifyPluginAsync<PortalOptions> = async (app, { prefix, files = loadPortal, login }) => {
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
    // The login through an identity provider: the providers the page offers, and the flow's three steps.
    scope.get(`${prefix}/oidc/providers`, { schema: { hide: true } }, async (_request, reply) => {
      reply.header('cache-control', 'no-store')
      return login?.service.providers() ?? []
    })
    if (login !== undefined) await scope.register(async (oidc) => loginRoutes(oidc, prefix, login))
    // anything else under the prefix is the portal's, and not found: never a business route's
    scope.all(`${prefix}/*`, { schema: { hide: true } }, async () => {
      throw new GatewayError('NOT_FOUND', `The portal has no such page: it lives at ${prefix}/`)
    })
  })
}

type Scope = Parameters<FastifyPluginAsync>[0]

async function loginRoutes (oidc: Scope, prefix: string, { service, store }: NonNullable<PortalOptions['login']>): Promise<void> {
  const cookiePath = `${prefix}/oidc/`
  const setCookie = (reply: FastifyReply, value: string, maxAge: number, secure: boolean): void => {
    reply.header('set-cookie', `${LOGIN_COOKIE}=${value}; Path=${cookiePath}; Max-Age=${maxAge}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`)
  }
  /** where the page shows the outcome: a fragment, never sent to a server nor in a Referer */
  const toPage = (reply: FastifyReply, handoff: string): FastifyReply =>
    reply.header('cache-control', 'no-store').redirect(`${prefix}/#/login?handoff=${handoff}`, 303)

  /** RATE_LIMITED past LOGIN_STARTS_PER_MINUTE of `step` from the request's address (an IPv6 /64 counts as one) */
  const withinBudget = async (request: FastifyRequest, step: 'start' | 'callback'): Promise<void> => {
    const { count, resetMs } = await store.hit(`portal-login-${step}:${addressBucket(request.ip)}`, 60_000)
    if (count > LOGIN_STARTS_PER_MINUTE) {
      throw new GatewayError('RATE_LIMITED', `More than ${LOGIN_STARTS_PER_MINUTE} login ${step}s from this address in a minute: wait and try again`,
        { headers: { 'retry-after': String(Math.max(1, Math.ceil(resetMs / 1000))) } })
    }
  }

  oidc.get(`${prefix}/oidc/:issuer/start`, { schema: { hide: true } }, async (request, reply) => {
    const { issuer } = request.params as { issuer: string }
    if (!service.has(issuer)) throw new GatewayError('NOT_FOUND', `The portal logs in through no issuer named ${JSON.stringify(issuer.slice(0, 64))}`)
    // each start keeps a state for 10 minutes: an address may not start more than this many a minute
    await withinBudget(request, 'start')
    const query = request.query as Record<string, unknown>
    const host = request.host
    if (!isPlainAuthority(host)) throw new GatewayError('VALIDATION_FAILED', 'The Host header is not one a redirect URI can be made of')
    const https = request.protocol === 'https'
    let started: Awaited<ReturnType<PortalLogin['start']>>
    try {
      started = await service.start(issuer, {
        redirectUri: `${request.protocol}://${host}${prefix}/oidc/callback`,
        then: typeof query.then === 'string' ? query.then : undefined
      })
    } catch (err) {
      // the IdP's discovery failed: the page says why, as for a failed callback
      return toPage(reply, await service.problem(err))
    }
    setCookie(reply, started.binding, LOGIN_STATE_TTL_MS / 1000, https || started.redirectUri.startsWith('https:'))
    return reply.header('cache-control', 'no-store').redirect(started.location, 303)
  })

  oidc.get(`${prefix}/oidc/callback`, { schema: { hide: true } }, async (request, reply) => {
    // each callback, good or not, keeps a handoff for 60 s: as many a minute as starts
    await withinBudget(request, 'callback')
    const handoff = await service.callback(request.query as Record<string, unknown>, loginCookie(request))
    return toPage(reply, handoff)
  })

  oidc.post(`${prefix}/oidc/session`, { schema: { hide: true, body: SessionRequest }, bodyLimit: 1024 }, async (request, reply) => {
    const { handoff } = request.body as { handoff: string }
    const session = await service.redeem(handoff, loginCookie(request))
    setCookie(reply, '', 0, request.protocol === 'https')
    reply.header('cache-control', 'no-store')
    return session
  })
}

export const portalPlugin = fp(portal, { name: 'keygate-portal', fastify: '5.x' })
