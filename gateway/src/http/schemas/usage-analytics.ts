// Usage over time (analytics/read.ts), as the admin API's /v1/usage/top and /v1/usage/series and
// a user's GET /v1/api-keys/{apiKey}/usage/series answer it (TypeBox).
import { Type } from '@sinclair/typebox'
import { WINDOW_HELP, WINDOW_PATTERN } from '../../analytics/read.js'

/** `?since=`, the window up to now, and what it is when not given */
export const Since = (fallback: string) => Type.String({ pattern: WINDOW_PATTERN, description: `the window up to now: ${WINDOW_HELP}; default ${fallback}` })

const Totals = {
  requests: Type.Integer({ description: 'requests answered' }),
  refusals: Type.Integer({ description: 'of them, requests keygate refused (answered with one of its error codes)' }),
  statuses: Type.Record(Type.String(), Type.Integer(), { description: 'requests by status class: 2xx, 3xx, 4xx, 5xx' }),
  codes: Type.Record(Type.String(), Type.Integer(), { description: 'refusals by error code' })
}

const Window = {
  since: Type.String({ description: 'the window as asked' }),
  resolution: Type.Union([Type.Literal('minute'), Type.Literal('hour')], {
    description: 'minute buckets for windows up to 6h, hour buckets beyond (up to 14d)'
  }),
  bucketSeconds: Type.Integer(),
  from: Type.String({ format: 'date-time', description: 'the start of the first bucket read' }),
  to: Type.String({ format: 'date-time', description: 'the end of the last bucket read (the current bucket, still counting)' })
}

export const Dimension = Type.Union([Type.Literal('key'), Type.Literal('user'), Type.Literal('route'), Type.Literal('agent')], {
  description: 'agent: a signed agent, by its directory origin'
})

export const TopUsage = Type.Object({
  by: Dimension,
  order: Type.Union([Type.Literal('requests'), Type.Literal('refusals')]),
  ...Window,
  items: Type.Array(Type.Object({
    name: Type.Union([Type.String(), Type.Null()], {
      description: 'the apiKey, username, route or agent\'s origin; null for requests without one (no key: a bearer token, a public route, ' +
        'a refusal before a key was found; no user; no signed agent), and "other" for requests past KEYGATE_USAGE_MAX_SERIES'
    }),
    ...Totals
  }), { description: 'most first; only those with at least one request (or refusal) in the window' })
})

export const UsageSeries = Type.Object({
  by: Dimension,
  name: Type.String(),
  ...Window,
  points: Type.Array(Type.Object({ at: Type.String({ format: 'date-time', description: 'the bucket\'s start' }), ...Totals }), {
    description: 'every bucket of the window, oldest first, zeros included'
  }),
  mcpCalls: Type.Array(Type.Object({
    route: Type.String(),
    method: Type.String({ description: 'the JSON-RPC method: one the MCP specification defines, "other", or "batch" for a request of several messages' }),
    tool: Type.Union([Type.String(), Type.Null()], {
      description: 'tools/call: the tool as the route\'s policy lists it (a name, or the glob that took it), "other" for a name it does not list; ' +
        'null for other methods'
    }),
    requests: Type.Integer(),
    refusals: Type.Integer({ description: 'of them, requests keygate refused' })
  }), { description: 'the requests on MCP routes over the window, by route, method and tool (docs/mcp.md), most first' })
})
