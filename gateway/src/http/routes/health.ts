import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsync } from 'fastify'
import type { Store } from '../../store/index.js'

/** /healthz: the process serves. /readyz: and its store answers. */
export const healthRoutes: FastifyPluginAsync<{ store: Store }> = async (app, { store }) => {
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
    await store.ping()
    return { status: 'ready' as const, store: store.kind }
  })
}
