import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsync } from 'fastify'
import { GatewayError } from '../../errors.js'
import type { IssuerKeys } from '../../idp/issuer-keys.js'
import type { Store } from '../../store/index.js'

/** /healthz: the process serves. /readyz: and its store answers, and the keys of every issuer trusted now are usable. */
export const healthRoutes: FastifyPluginAsync<{ store: Store, identityProviders: () => readonly IssuerKeys[] }> = async (app, { store, identityProviders }) => {
  app.get('/healthz', {
    schema: {
      summary: 'Liveness: 200 once the gateway serves',
      tags: ['operations'],
      response: { 200: Type.Object({ status: Type.Literal('ok') }) }
    }
  }, async () => ({ status: 'ok' as const }))
  app.get('/readyz', {
    config: { problems: ['STORE_UNAVAILABLE', 'IDP_KEYS_UNAVAILABLE'] },
    schema: {
      summary: 'Readiness: 200 when the key and user store answers and every trusted identity provider\'s keys are usable',
      tags: ['operations'],
      response: { 200: Type.Object({ status: Type.Literal('ready'), store: Type.Union([Type.Literal('redis'), Type.Literal('memory')]) }) }
    }
  }, async () => {
    await store.ping()
    const unusable = identityProviders().filter((keys) => !keys.state().usable)
    if (unusable.length > 0) {
      throw new GatewayError('IDP_KEYS_UNAVAILABLE', 'keygate has no usable keys of ' +
        unusable.map((keys) => `${keys.issuer.name} (${keys.state().lastError ?? 'not fetched yet'})`).join('; '), { headers: { 'retry-after': '5' } })
    }
    return { status: 'ready' as const, store: store.kind }
  })
}
