// Counts every answered request for the metrics (metrics/metrics.ts): by route, method and status,
// and, where the route authenticates, how authentication ended (and on routes that take signed
// agents, by agent: a pinned one by origin, any other as `other`). Labels come from the route table
// or keygate's own route paths, never from the URL a client sent, so their number stays bounded.
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { messageLabels } from '../../mcp-calls/labels.js'
import type { GatewayMetrics } from '../../metrics/metrics.js'
import { PROXY_ROUTE_URLS } from './catch-all.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** keygate's own route authenticates its caller: its auth outcome is counted in the metrics */
    authenticates?: boolean
  }
}

/** requests no route took (404 NOT_FOUND, or refused before routing) */
export const NO_ROUTE = 'none'

/** the business route's name, keygate's own endpoint path, or NO_ROUTE */
export function routeLabel (request: FastifyRequest): string {
  const route = request.forward?.route
  if (route !== undefined) return route.name
  const url = request.routeOptions.url
  return url === undefined || PROXY_ROUTE_URLS.has(url) ? NO_ROUTE : url
}

const metricsHooks: FastifyPluginAsync<{ metrics: GatewayMetrics }> = async (app, { metrics }) => {
  app.addHook('onResponse', (request, reply, done) => {
    const route = routeLabel(request)
    metrics.countRequest(route, request.method, reply.statusCode)
    const authenticates = request.forward?.route !== undefined
      ? request.forward.route.auth !== 'public'
      : request.routeOptions.config.authenticates === true
    // A request that ended before authentication finished without a denial (the client went away) counts nowhere.
    const reason = request.authenticated ? 'ok' : request.denialReason
    if (authenticates && reason !== null) metrics.countAuthOutcome(route, reason)
    // routes that take signed agents: by agent, an unpinned one only as `other` (agents can be anyone)
    if (request.forward?.route.agents !== undefined && reason !== null) {
      const agent = request.auth?.agent
      metrics.countAgentRequest(agent === undefined ? 'none' : agent.pinned ? agent.origin : 'other', reason)
    }
    // MCP routes: each JSON-RPC message read, by method and tool (bounded: mcp-calls/labels.ts)
    const mcp = request.forward?.route.mcp
    if (mcp !== undefined) {
      for (const message of request.auth?.mcpMessages ?? []) {
        const labels = messageLabels(mcp, message)
        metrics.countMcpMessage(route, labels.method, labels.tool ?? '', reply.statusCode)
      }
    }
    done()
  })
}

export const metricsPlugin = fp(metricsHooks, { name: 'keygate-metrics', fastify: '5.x', dependencies: ['keygate-problems'] })
