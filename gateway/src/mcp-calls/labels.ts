// What metrics, usage analytics and traces call an MCP message, in a bounded number of names: its
// method when the MCP specification defines it (any version up to 2025-11-25), else `other`; and
// for tools/call, the tool by the route's policy: a name `tools` or `toolRateLimits` lists exactly
// is itself, a name a glob there takes is the glob, any other name `other`. A client chooses the
// names it sends: never one of them as a label unless the operator wrote it.
import type { McpMessage } from './messages.js'
import { lookup, type McpPolicy } from './policy.js'

/** the label of every name outside the bounded set */
export const OTHER_LABEL = 'other'
/** the method label of a message that has none: a client's response to a request of the server */
export const RESPONSE_LABEL = 'response'
/** the method label of a request whose body is a batch (usage and traces label a request, metrics each message) */
export const BATCH_LABEL = 'batch'

/** the methods of the MCP specification (2024-11-05 to 2025-11-25), requests and notifications */
export const MCP_METHODS: readonly string[] = [
  'initialize', 'ping', 'tools/list', 'tools/call', 'resources/list', 'resources/templates/list', 'resources/read',
  'resources/subscribe', 'resources/unsubscribe', 'prompts/list', 'prompts/get', 'logging/setLevel', 'completion/complete',
  'sampling/createMessage', 'roots/list', 'elicitation/create', 'tasks/get', 'tasks/result', 'tasks/list', 'tasks/cancel',
  'notifications/initialized', 'notifications/cancelled', 'notifications/progress', 'notifications/message',
  'notifications/roots/list_changed', 'notifications/resources/updated', 'notifications/resources/list_changed',
  'notifications/tools/list_changed', 'notifications/prompts/list_changed', 'notifications/elicitation/complete',
  'notifications/tasks/status'
]
const METHODS = new Set(MCP_METHODS)

export interface McpLabels {
  method: string
  /** tools/call only */
  tool?: string
}

/** A tool name as a label: as the policy lists it, its glob, or `other`. */
export function toolLabel (policy: McpPolicy, name: string): string {
  return lookup(policy.toolLabels, name)?.pattern ?? OTHER_LABEL
}

/** One message's labels. */
export function messageLabels (policy: McpPolicy, message: McpMessage): McpLabels {
  const method = message.method
  if (method === undefined) return { method: RESPONSE_LABEL }
  if (method === 'tools/call') return { method, tool: toolLabel(policy, String(message.params?.name)) }
  return { method: METHODS.has(method) ? method : OTHER_LABEL }
}

/** A request's labels: its one message's; `batch` for several; undefined for none (a GET stream, a DELETE, a body refused before it was read). */
export function requestLabels (policy: McpPolicy, messages: readonly McpMessage[] | undefined): McpLabels | undefined {
  if (messages === undefined || messages.length === 0) return undefined
  return messages.length === 1 ? messageLabels(policy, messages[0] as McpMessage) : { method: BATCH_LABEL }
}
