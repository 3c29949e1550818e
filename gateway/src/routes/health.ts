import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsync } from 'fastify'

/** /healthz: the process serves. /readyz: and its store answers. */
export const healthRoutes: FastifyPluginAsync = async (app) => {
  app.get('/healthz', {
    schema: {
      summary: 'Liveness: 200 once the gateway serves',
      tags: ['operations'],
      response: { 200: Type.Object({ status: Type.Literal('ok') }) }
    }
  }, async () => ({ status: 'ok' as const }))
  app.get('/readyz', {
    config: { problems: ['STORE_UNAVAILABLE'] },
    schema: {
      summary: 'Readiness: 200 when the key and user store answers',
      tags: ['operations'],
      response: { 200: Type.Object({ status: Type.Literal('ready'), store: Type.Union([Type.Literal('redis'), Type.Literal('memory')]) }) }
    }
  }, async () => {
    await app.keygate.store.ping()
    return { status: 'ready' as const, store: app.keygate.store.kind }
  })
}
