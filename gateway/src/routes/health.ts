import type { FastifyPluginAsync } from 'fastify'

/** /healthz: the process serves. /readyz: and its store answers. */
export const healthRoutes: FastifyPluginAsync = async (app) => {
  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async () => {
    await app.keygate.store.ping()
    return { status: 'ready', store: app.keygate.store.kind }
  })
}
