// The admin API: a listener of its own (KEYGATE_ADMIN_PORT, on 127.0.0.1 unless
// KEYGATE_ADMIN_HOST says otherwise), never the public port, so what can reach it is decided by
// where it listens, and every request needs KEYGATE_ADMIN_TOKEN besides (auth.ts). JSON in and
// out, problem+json errors from the one catalog, an OpenAPI document at /docs/json, an audit
// line for every change (audit.ts). One file per resource: users.ts, keys.ts, routes.ts, usage.ts.
// A single gateway runs it beside its app on the same services (process/start.ts); a cluster's
// primary runs it on a store connection of its own, reaching its workers' routes over IPC.
import swagger from '@fastify/swagger'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { randomUUID } from 'node:crypto'
import { DEFAULT_HEADERS_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS, MAX_HEADER_BYTES } from '../config/env.js'
import { clientErrorHandler, frameworkErrors, problemsPlugin } from '../http/plugins/problems.js'
import { refuseMalformedRequestLine } from '../http/plugins/request-target.js'
import { COMMON_PROBLEMS, PROBLEM_SCHEMA } from '../http/docs/openapi.js'
import { problemsAsResponses, withProblems } from '../http/plugins/docs.js'
import { TrackedIncomingMessage, trackRequestLines } from '../lib/request-line-tracker.js'
import { keygateVersion } from '../lib/version.js'
import { auditPlugin } from './audit.js'
import { adminTokenCheck } from './auth.js'
import { adminKeyRoutes } from './keys.js'
import type { Operations } from './operations.js'
import { adminReloadRoutes, type FilesReload } from './reload.js'
import type { RouteControl } from './route-control.js'
import { adminRouteRoutes } from './routes.js'
import { adminUsageRoutes, type UsageReader } from './usage.js'
import { adminUserRoutes } from './users.js'
import type { Store } from '../store/index.js'

export interface AdminServices {
  operations: Operations
  routes: RouteControl
  /** the route, issuers and agents files reloaded together (POST /v1/reload) */
  files: FilesReload
  /** where a key or a user stands against the rate limits of the routes in force */
  usage: UsageReader
  /** usage over time, as every gateway on the store counted it (analytics/) */
  analytics: Pick<Store, 'readUsageCounts'>
}

export interface AdminServerOptions {
  port: number
  host: string
  token: string
  log?: FastifyBaseLogger
}

export interface AdminServer {
  url: string
  close: () => Promise<void>
}

/** a body is a password and a name at most */
const ADMIN_BODY_LIMIT = 16 * 1024
/** slow clients are cut off here as on the public port (config/env.ts's defaults) */
const ADMIN_HEADERS_TIMEOUT_MS = DEFAULT_HEADERS_TIMEOUT_MS
const ADMIN_REQUEST_TIMEOUT_MS = DEFAULT_REQUEST_TIMEOUT_MS
export const ADMIN_DOCS_PATH = '/docs/json'

/** What every admin request can meet besides its own errors: the token check first. */
const ADMIN_PROBLEMS = ['MISSING_TOKEN', 'INVALID_TOKEN'] as const

const DESCRIPTION = [
  'The admin API of a keygate gateway: users, keys and routes, for operators and automation.',
  '',
  'It listens on a port of its own (`KEYGATE_ADMIN_PORT`, on 127.0.0.1 by default), never on the public port. Every request, this ' +
    'document included, needs `Authorization: Bearer <KEYGATE_ADMIN_TOKEN>`. Every change (PUT and DELETE of a user, DELETE of a key, ' +
    'a reload) is written to the gateway\'s log as an audit line.',
  '',
  'Errors are RFC 9457 `application/problem+json` with a stable `code`, from the same catalog as the gateway\'s.'
].join('\n')

/** The admin app, not listening yet (tests inject into it). */
export async function buildAdminApp (services: AdminServices, options: Omit<AdminServerOptions, 'port' | 'host'>): Promise<FastifyInstance> {
  const app = Fastify({
    ...(options.log !== undefined && { loggerInstance: options.log }),
    logController: new LogController({ disableRequestLogging: true }),
    genReqId: () => randomUUID(),
    bodyLimit: ADMIN_BODY_LIMIT,
    requestTimeout: ADMIN_REQUEST_TIMEOUT_MS,
    http: {
      headersTimeout: ADMIN_HEADERS_TIMEOUT_MS,
      maxHeaderSize: MAX_HEADER_BYTES,
      connectionsCheckingInterval: 1000,
      requireHostHeader: false,
      IncomingMessage: TrackedIncomingMessage
    },
    frameworkErrors,
    clientErrorHandler,
    ajv: { customOptions: { coerceTypes: false, removeAdditional: false, allErrors: true, useDefaults: false } }
  }).withTypeProvider<TypeBoxTypeProvider>()

  await app.register(problemsPlugin)
  // JSON only: a text/plain body is 415, not a string the schema then refuses
  app.removeContentTypeParser('text/plain')
  // runs of spaces in the request line, an HTTP/0.9 line, another version, two Hosts: refused as on the public port
  trackRequestLines(app.server, MAX_HEADER_BYTES)
  app.addHook('onRequest', refuseMalformedRequestLine)
  // first of the checks of what was sent: nothing is read, routed or documented for a caller without the token
  app.addHook('onRequest', adminTokenCheck(options.token))
  app.addHook('onSend', async (request, reply) => {
    reply.header('x-request-id', request.id)
    // answers about users and keys are for the operator who asked, never for a cache on the way
    reply.header('cache-control', 'no-store')
  })
  await app.register(auditPlugin)
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'keygate admin API', version: keygateVersion(), description: DESCRIPTION },
      tags: [
        { name: 'users', description: 'Users: their passwords and their keys' },
        { name: 'keys', description: 'Registered API keys: list, show, revoke' },
        { name: 'routes', description: 'The route table in force, and reloading the route file (or every file: routes, issuers, agents)' },
        {
          name: 'usage',
          description: 'Rate limits and quotas: what a key, a user or an agent has used, and what remains; requests over time by key, user, route and agent'
        }
      ],
      components: {
        securitySchemes: {
          adminToken: { type: 'http', scheme: 'bearer', description: 'KEYGATE_ADMIN_TOKEN, as `Authorization: Bearer <token>`' }
        },
        schemas: { Problem: PROBLEM_SCHEMA }
      },
      security: [{ adminToken: [] }]
    },
    transform: ({ schema, url, route }) => ({
      schema: withProblems(schema ?? {}, [...COMMON_PROBLEMS, ...ADMIN_PROBLEMS, ...route.config?.problems ?? []]),
      url
    }),
    transformObject: problemsAsResponses
  })

  app.get(ADMIN_DOCS_PATH, { schema: { hide: true } }, async () => app.swagger())
  await app.register(adminUserRoutes, { operations: services.operations })
  await app.register(adminKeyRoutes, { operations: services.operations })
  await app.register(adminRouteRoutes, { routes: services.routes })
  await app.register(adminReloadRoutes, { files: services.files })
  await app.register(adminUsageRoutes, { usage: services.usage, operations: services.operations, analytics: services.analytics })
  return app
}

export async function startAdminServer (services: AdminServices, options: AdminServerOptions): Promise<AdminServer> {
  const app = await buildAdminApp(services, options)
  try {
    const url = await app.listen({ port: options.port, host: options.host })
    return { url, close: async () => { await app.close() } }
  } catch (err) {
    await app.close()
    throw err
  }
}
