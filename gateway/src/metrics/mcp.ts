// MCP routes' messages (docs/mcp.md): each JSON-RPC message of an answered request, by route, its
// method and tool (bounded labels: mcp-calls/labels.ts) and the answer's status. Counted in nested
// Maps and turned into the prom-client counter at scrape time, like the request counts.
import { Counter, type Registry } from 'prom-client'

export const MCP_MESSAGES_METRIC = 'keygate_mcp_messages_total'

export interface McpMetrics {
  /** one JSON-RPC message on an MCP route: `tool` for tools/call ('' for any other method), `status` the request's answer */
  countMcpMessage: (route: string, method: string, tool: string, status: number) => void
}

export function mcpMetrics (registry: Registry): McpMetrics {
  /** route -> "method tool status" -> count (a method label has no space; a tool label may, so it is last but one) */
  const messages = new Map<string, Map<string, { method: string; tool: string; status: number; count: number }>>()
  // eslint-disable-next-line no-new -- a prom-client metric registers itself in `registers`
  new Counter({
    name: MCP_MESSAGES_METRIC,
    help: 'JSON-RPC messages on MCP routes, by route, method (the MCP specification\'s, else "other"), tool (tools/call: ' +
      'a name or glob the route\'s policy lists, else "other"; empty for other methods) and the answer\'s status',
    labelNames: ['route', 'method', 'tool', 'status'] as const,
    registers: [registry],
    collect () {
      this.reset()
      for (const [route, series] of messages) {
        for (const { method, tool, status, count } of series.values()) this.inc({ route, method, tool, status: String(status) }, count)
      }
    }
  })
  return {
    countMcpMessage (route, method, tool, status) {
      let series = messages.get(route)
      if (series === undefined) messages.set(route, series = new Map())
      const id = `${method} ${status} ${tool}`
      const entry = series.get(id)
      if (entry === undefined) series.set(id, { method, tool, status, count: 1 })
      else entry.count++
    }
  }
}
