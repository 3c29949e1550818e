// The OpenAPI 3.1 document at /docs/json (and /docs/yaml) and its Swagger UI page at /docs, all
// served from this process (the UI's assets ship in @fastify/swagger-ui: no CDN). keygate's own
// endpoints come from their Fastify route schemas, with the error codes each route declares in
// `config.problems`; the business routes come from the live route table at each request, so a
// reload shows at once. Registered before every route (it learns routes as they are added), and
// its paths are ordinary Fastify routes, which the router matches before the proxy's catch-all.
import swagger, { type FastifyDynamicSwaggerOptions } from '@fastify/swagger'
import swaggerUi from '@fastify/swagger-ui'
import type { FastifyPluginAsync, FastifySchema } from 'fastify'
import fp from 'fastify-plugin'
import { keygateVersion } from '../../lib/version.js'
import type { RouteRegistry } from '../../proxy/route-registry.js'
import {
  BUSINESS_TAG, COMMON_PROBLEMS, DOCUMENT_DESCRIPTION, ERRORS_EXTENSION, PROBLEM_SCHEMA, SECURITY_SCHEMES,
  businessPaths, problemCodes, problemResponses, type DocumentedProblem, type OperationObject
} from '../docs/openapi.js'
import { PROXY_ROUTE_URLS } from './catch-all.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** the error codes this route can answer, beyond COMMON_PROBLEMS (documented in the OpenAPI document) */
    problems?: readonly DocumentedProblem[]
  }
}

export const DOCS_PREFIX = '/docs'
/** carries a route's problems from `transform` to `transformObject`, where they become responses */
const PROBLEMS_EXTENSION = 'x-keygate-problems'
/**
 * The page's own assets and nothing else: scripts and styles from this origin (Swagger UI sets
 * inline styles), images also as data: URLs.
 */
const CONTENT_SECURITY_POLICY = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
  "connect-src 'self'; object-src 'none'; base-uri 'self'; frame-ancestors 'none'; form-action 'none'"

type Paths = Record<string, Record<string, OperationObject | unknown>>

/** A route schema that carries its problems to problemsAsResponses (a `transform` of @fastify/swagger returns it). */
export function withProblems (schema: FastifySchema, problems: readonly DocumentedProblem[]): FastifySchema {
  return { ...schema, [PROBLEMS_EXTENSION]: problems } as FastifySchema
}

/**
 * A `transformObject` of @fastify/swagger: each operation's problems (withProblems) become its
 * problem+json responses and its `x-keygate-errors`. keygate's document and the admin API's use it.
 */
export const problemsAsResponses: NonNullable<FastifyDynamicSwaggerOptions['transformObject']> = (document) => {
  const openapi = 'openapiObject' in document ? document.openapiObject : document.swaggerObject
  for (const item of Object.values((openapi.paths ?? {}) as Paths)) {
    for (const operation of Object.values(item)) {
      const op = operation as OperationObject
      const problems = op[PROBLEMS_EXTENSION] as readonly DocumentedProblem[] | undefined
      if (problems === undefined) continue
      delete op[PROBLEMS_EXTENSION]
      op.responses = { ...op.responses, ...problemResponses(problems) }
      op[ERRORS_EXTENSION] = [...new Set(problemCodes(problems).map(([code]) => code))]
    }
  }
  return openapi
}

const docs: FastifyPluginAsync<{ routes: RouteRegistry }> = async (app, { routes }) => {
  const swaggerOptions: FastifyDynamicSwaggerOptions = {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'keygate', version: keygateVersion(), description: DOCUMENT_DESCRIPTION },
      tags: [
        { name: 'auth', description: 'Log in, register signing keys' },
        { name: 'account', description: 'The routes you may call, and where your keys stand against their rate limits and quotas' },
        { name: BUSINESS_TAG, description: 'The configured routes to the services behind keygate' },
        { name: 'operations', description: 'Health and the token-signing public keys' }
      ],
      components: {
        securitySchemes: SECURITY_SCHEMES,
        schemas: { Problem: PROBLEM_SCHEMA }
      }
    },
    transform: ({ schema, url, route }) => {
      const own: FastifySchema = schema ?? {}
      if (PROXY_ROUTE_URLS.has(url) && route.config?.problems === undefined) return { schema: { ...own, hide: true }, url }
      return { schema: withProblems(own, [...COMMON_PROBLEMS, ...route.config?.problems ?? []]), url }
    },
    transformObject: problemsAsResponses
  }
  await app.register(swagger, swaggerOptions)
  await app.register(swaggerUi, {
    routePrefix: DOCS_PREFIX,
    staticCSP: CONTENT_SECURITY_POLICY,
    uiConfig: { deepLinking: true, docExpansion: 'list', defaultModelsExpandDepth: 0 },
    theme: { title: 'keygate API' },
    // the live route table, at every request: a route reload shows without a restart
    transformSpecification: (document) => {
      const paths = (document.paths ?? {}) as Paths
      for (const [path, item] of Object.entries(businessPaths(routes.current.routes))) {
        paths[path] = { ...item, ...paths[path] }
      }
      return { ...document, paths }
    }
  })
}

export const docsPlugin = fp(docs, { name: 'keygate-docs', fastify: '5.x' })
