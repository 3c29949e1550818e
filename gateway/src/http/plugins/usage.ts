// Usage analytics (analytics/): every answered request a business route took is one more in the
// in-process counts, by key, user, route, status class, keygate's error code and signed agent (on MCP routes,
// the JSON-RPC method and tool too). keygate's own
// endpoints (token, keys, usage, docs) and requests no route took are not counted. Registered only
// when KEYGATE_USAGE_ANALYTICS is on: off, no hook runs.
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import { NONE } from '../../analytics/buckets.js'
import type { UsageCounter } from '../../analytics/counter.js'
import { requestLabels } from '../../mcp-calls/labels.js'

const usageHooks: FastifyPluginAsync<{ counter: UsageCounter }> = async (app, { counter }) => {
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.forward?.route
    if (route !== undefined) {
      const auth = request.auth
      // a refused signature still names its key once the key was found: "which keys made the most 401s"
      const key = auth?.key
      counter.count(key?.apiKey ?? NONE, auth?.user ?? key?.owner ?? NONE, route.name, reply.statusCode, request.denialReason ?? NONE,
        auth?.agent?.origin ?? NONE, route.mcp === undefined ? undefined : requestLabels(route.mcp, auth?.mcpMessages))
    }
    done()
  })
}

export const usagePlugin = fp(usageHooks, { name: 'keygate-usage', fastify: '5.x', dependencies: ['keygate-problems'] })
