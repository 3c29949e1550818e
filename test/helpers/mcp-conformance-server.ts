// The MCP conformance suite's fixtures (@modelcontextprotocol/conformance 0.1.16: the tools,
// resources and prompts its server scenarios call, as its reference server,
// examples/servers/typescript/everything-server.ts in the suite's repository, which its npm
// package does not ship, defines them), served by the MCP TypeScript SDK's low-level Server behind
// its StreamableHTTPServerTransport, stateful (a server and transport per session, as the reference
// keeps them), on a free loopback port, at every path. Unlike the reference: the server's own
// requests (sampling, elicitation) are tied to the tool call, so they travel on the call's SSE
// answer with its logging and progress, as server-everything's do. The reference sends them untied,
// on the session's GET stream, which the SDK's client opens without waiting, just before its
// tools/call: through a gateway the call overtook the GET by a millisecond in about half the runs,
// and the SDK's transport dropped the request for want of a stream, the call then hanging (not a
// gateway's to order two requests). No Host/Origin check either: that is keygate's (docs/mcp.md,
// "The Origin"). Not ported: test_reconnection (SEP-1699, a pending scenario).
import { randomUUID } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import {
  CallToolRequestSchema, CompleteRequestSchema, CreateMessageResultSchema, ElicitResultSchema, GetPromptRequestSchema, ListPromptsRequestSchema,
  ListResourcesRequestSchema, ListResourceTemplatesRequestSchema, ListToolsRequestSchema, ReadResourceRequestSchema, SetLevelRequestSchema,
  SubscribeRequestSchema, UnsubscribeRequestSchema, isInitializeRequest, type CallToolResult, type ElicitRequest, type GetPromptResult,
  type ServerNotification, type ServerRequest
} from '@modelcontextprotocol/sdk/types.js'
import type { RequestHandlerExtra } from '@modelcontextprotocol/sdk/shared/protocol.js'

const IMAGE = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=='
const AUDIO = 'UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA='
const text = (value: string): CallToolResult => ({ content: [{ type: 'text', text: value }] })
const pause = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }

/** an elicitation's params as the reference sends them (schemas richer than the SDK's types spell out) */
interface Elicitation { message: string, requestedSchema: unknown }
const ELICIT_DEFAULTS = {
  type: 'object',
  properties: {
    name: { type: 'string', description: 'User name', default: 'John Doe' },
    age: { type: 'integer', description: 'User age', default: 30 },
    score: { type: 'number', description: 'User score', default: 95.5 },
    status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
    verified: { type: 'boolean', description: 'Verification status', default: true }
  },
  required: []
}
const ELICIT_ENUMS = {
  type: 'object',
  properties: {
    untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
    titledSingle: {
      type: 'string',
      description: 'Select one option with titles',
      oneOf: [{ const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' }, { const: 'value3', title: 'Third Option' }]
    },
    legacyEnum: {
      type: 'string', description: 'Select one option (legacy)', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three']
    },
    untitledMulti: {
      type: 'array', description: 'Select multiple options', minItems: 1, maxItems: 3, items: { type: 'string', enum: ['option1', 'option2', 'option3'] }
    },
    titledMulti: {
      type: 'array',
      description: 'Select multiple options with titles',
      minItems: 1,
      maxItems: 3,
      items: { anyOf: [{ const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' }, { const: 'value3', title: 'Third Choice' }] }
    }
  },
  required: []
}
const JSON_SCHEMA_2020_12 = {
  $schema: 'https://json-schema.org/draft/2020-12/schema',
  type: 'object' as const,
  $defs: { address: { type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
  properties: { name: { type: 'string' }, address: { $ref: '#/$defs/address' } },
  additionalProperties: false
}

const EMPTY = { type: 'object' as const, properties: {} }
const TOOLS = [
  { name: 'test_simple_text', description: 'Tests simple text content response', inputSchema: EMPTY },
  { name: 'test_image_content', description: 'Tests image content response', inputSchema: EMPTY },
  { name: 'test_audio_content', description: 'Tests audio content response', inputSchema: EMPTY },
  { name: 'test_embedded_resource', description: 'Tests embedded resource content response', inputSchema: EMPTY },
  {
    name: 'test_multiple_content_types', description: 'Tests response with multiple content types (text, image, resource)', inputSchema: EMPTY
  },
  { name: 'test_tool_with_logging', description: 'Tests tool that emits log messages during execution', inputSchema: EMPTY },
  { name: 'test_tool_with_progress', description: 'Tests tool that reports progress notifications', inputSchema: EMPTY },
  { name: 'test_error_handling', description: 'Tests error response handling', inputSchema: EMPTY },
  {
    name: 'test_sampling',
    description: 'Tests server-initiated sampling (LLM completion request)',
    inputSchema: { type: 'object' as const, properties: { prompt: { type: 'string', description: 'The prompt to send to the LLM' } }, required: ['prompt'] }
  },
  {
    name: 'test_elicitation',
    description: 'Tests server-initiated elicitation (user input request)',
    inputSchema: { type: 'object' as const, properties: { message: { type: 'string', description: 'The message to show the user' } }, required: ['message'] }
  },
  { name: 'test_elicitation_sep1034_defaults', description: 'Tests elicitation with default values per SEP-1034', inputSchema: EMPTY },
  { name: 'test_elicitation_sep1330_enums', description: 'Tests elicitation with enum schema improvements per SEP-1330', inputSchema: EMPTY },
  {
    name: 'json_schema_2020_12_tool', description: 'Tool with JSON Schema 2020-12 features for conformance testing (SEP-1613)', inputSchema: JSON_SCHEMA_2020_12
  }
]

const RESOURCES = {
  'test://static-text': { name: 'static-text', title: 'Static Text Resource', mimeType: 'text/plain', text: 'This is the content of the static text resource.' },
  'test://static-binary': { name: 'static-binary', title: 'Static Binary Resource', mimeType: 'image/png', blob: IMAGE },
  'test://watched-resource': { name: 'watched-resource', title: 'Watched Resource', mimeType: 'text/plain', text: 'Watched resource content' }
} as const

const PROMPTS = [
  { name: 'test_simple_prompt', title: 'Simple Test Prompt', description: 'A simple prompt without arguments' },
  {
    name: 'test_prompt_with_arguments',
    title: 'Prompt With Arguments',
    description: 'A prompt with required arguments',
    arguments: [{ name: 'arg1', description: 'First test argument', required: true }, { name: 'arg2', description: 'Second test argument', required: true }]
  },
  {
    name: 'test_prompt_with_embedded_resource',
    title: 'Prompt With Embedded Resource',
    description: 'A prompt that includes an embedded resource',
    arguments: [{ name: 'resourceUri', description: 'URI of the resource to embed', required: true }]
  },
  { name: 'test_prompt_with_image', title: 'Prompt With Image', description: 'A prompt that includes image content' }
]

function prompt (name: string, args: Record<string, string>): GetPromptResult {
  const user = (content: GetPromptResult['messages'][number]['content']): GetPromptResult['messages'][number] => ({ role: 'user', content })
  switch (name) {
    case 'test_simple_prompt': return { messages: [user({ type: 'text', text: 'This is a simple prompt for testing.' })] }
    case 'test_prompt_with_arguments':
      return { messages: [user({ type: 'text', text: `Prompt with arguments: arg1='${args.arg1 ?? ''}', arg2='${args.arg2 ?? ''}'` })] }
    case 'test_prompt_with_embedded_resource':
      return {
        messages: [
          user({ type: 'resource', resource: { uri: args.resourceUri ?? '', mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
          user({ type: 'text', text: 'Please process the embedded resource above.' })
        ]
      }
    case 'test_prompt_with_image':
      return { messages: [user({ type: 'image', data: IMAGE, mimeType: 'image/png' }), user({ type: 'text', text: 'Please analyze the image above.' })] }
    default: throw new Error(`Prompt ${name} not found`)
  }
}

type Send = (notification: ServerNotification) => Promise<void>
/** the handler's extra.sendRequest: a request of the server's, tied to the request being handled */
type Ask = RequestHandlerExtra<ServerRequest, ServerNotification>['sendRequest']

async function elicit (ask: Ask, params: Elicitation, prefix: string): Promise<CallToolResult> {
  const result = await ask({ method: 'elicitation/create', params: params as unknown as ElicitRequest['params'] }, ElicitResultSchema)
  return text(`${prefix}: action=${result.action}, content=${JSON.stringify(result.content ?? {})}`)
}

async function callTool (ask: Ask, name: string, args: Record<string, unknown>, send: Send,
  progressToken: string | number | undefined): Promise<CallToolResult> {
  switch (name) {
    case 'test_simple_text': return text('This is a simple text response for testing.')
    case 'test_image_content': return { content: [{ type: 'image', data: IMAGE, mimeType: 'image/png' }] }
    case 'test_audio_content': return { content: [{ type: 'audio', data: AUDIO, mimeType: 'audio/wav' }] }
    case 'test_embedded_resource':
      return { content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] }
    case 'test_multiple_content_types':
      return {
        content: [
          { type: 'text', text: 'Multiple content types test:' },
          { type: 'image', data: IMAGE, mimeType: 'image/png' },
          { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: JSON.stringify({ test: 'data', value: 123 }) } }
        ]
      }
    case 'test_tool_with_logging':
      for (const [i, data] of ['Tool execution started', 'Tool processing data', 'Tool execution completed'].entries()) {
        if (i > 0) await pause(20)
        await send({ method: 'notifications/message', params: { level: 'info', data } })
      }
      return text('Tool with logging executed successfully')
    case 'test_tool_with_progress':
      for (const progress of [0, 50, 100]) {
        if (progress > 0) await pause(20)
        const params = { progressToken: progressToken ?? 0, progress, total: 100, message: `Completed step ${progress} of 100` }
        await send({ method: 'notifications/progress', params })
      }
      return text(String(progressToken ?? 0))
    case 'test_error_handling': return { isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] }
    case 'test_sampling': {
      const result = await ask({
        method: 'sampling/createMessage',
        params: { messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt) } }], maxTokens: 100 }
      }, CreateMessageResultSchema)
      return text(`LLM response: ${result.content.type === 'text' ? result.content.text : 'No response'}`)
    }
    case 'test_elicitation':
      return await elicit(ask, {
        message: String(args.message),
        requestedSchema: { type: 'object', properties: { response: { type: 'string', description: 'User\'s response' } }, required: ['response'] }
      }, 'User response')
    case 'test_elicitation_sep1034_defaults':
      return await elicit(ask, { message: 'Please review and update the form fields with defaults', requestedSchema: ELICIT_DEFAULTS },
        'Elicitation completed')
    case 'test_elicitation_sep1330_enums':
      return await elicit(ask, { message: 'Please select options from the enum fields', requestedSchema: ELICIT_ENUMS }, 'Elicitation completed')
    case 'json_schema_2020_12_tool': return text(`JSON Schema 2020-12 tool called with: ${JSON.stringify(args)}`)
    default: return { isError: true, content: [{ type: 'text', text: `Tool ${name} not found` }] }
  }
}

function conformanceServer (): Server {
  const server = new Server({ name: 'mcp-conformance-test-server', version: '1.0.0' }, {
    capabilities: {
      tools: { listChanged: true }, resources: { subscribe: true, listChanged: true }, prompts: { listChanged: true }, logging: {}, completions: {}
    }
  })
  const log = (data: string): void => { server.sendLoggingMessage({ level: 'info', logger: 'conformance-test-server', data }).catch(() => {}) }
  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: TOOLS }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) =>
    await callTool(extra.sendRequest, request.params.name, request.params.arguments ?? {}, extra.sendNotification, request.params._meta?.progressToken))
  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: Object.entries(RESOURCES).map(([uri, { name, title, mimeType }]) => ({ uri, name, title, mimeType }))
  }))
  server.setRequestHandler(ListResourceTemplatesRequestSchema, () => ({
    resourceTemplates: [{ uriTemplate: 'test://template/{id}/data', name: 'template', title: 'Resource Template', mimeType: 'application/json' }]
  }))
  server.setRequestHandler(ReadResourceRequestSchema, (request) => {
    const uri = request.params.uri
    const id = /^test:\/\/template\/([^/]+)\/data$/.exec(uri)?.[1]
    if (id !== undefined) {
      return { contents: [{ uri, mimeType: 'application/json', text: JSON.stringify({ id, templateTest: true, data: `Data for ID: ${id}` }) }] }
    }
    const resource = (RESOURCES as Record<string, { mimeType: string, text?: string, blob?: string }>)[uri]
    if (resource === undefined) throw new Error(`Resource ${uri} not found`)
    return { contents: [{ uri, mimeType: resource.mimeType, ...(resource.blob !== undefined ? { blob: resource.blob } : { text: resource.text ?? '' }) }] }
  })
  server.setRequestHandler(SubscribeRequestSchema, (request) => { log(`Subscribed to resource: ${request.params.uri}`); return {} })
  server.setRequestHandler(UnsubscribeRequestSchema, (request) => { log(`Unsubscribed from resource: ${request.params.uri}`); return {} })
  server.setRequestHandler(ListPromptsRequestSchema, () => ({ prompts: PROMPTS }))
  server.setRequestHandler(GetPromptRequestSchema, (request) => prompt(request.params.name, request.params.arguments ?? {}))
  server.setRequestHandler(SetLevelRequestSchema, (request) => { log(`Log level set to: ${request.params.level}`); return {} })
  server.setRequestHandler(CompleteRequestSchema, () => ({ completion: { values: [], total: 0, hasMore: false } }))
  return server
}

export interface ConformanceServer {
  /** http://127.0.0.1:PORT/mcp */
  url: string
  /** closes its sessions and connections (once; also done when the test ends) */
  stop: () => Promise<void>
}

export async function startConformanceServer (t: { teardown: (fn: () => unknown) => void }): Promise<ConformanceServer> {
  const transports = new Map<string, StreamableHTTPServerTransport>()
  const http = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      let body: unknown
      try { body = chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString()) } catch { body = undefined }
      const id = req.headers['mcp-session-id']
      let transport = typeof id === 'string' ? transports.get(id) : undefined
      if (transport === undefined && id === undefined && req.method === 'POST' && isInitializeRequest(body)) {
        const made = transport = new StreamableHTTPServerTransport({
          sessionIdGenerator: () => randomUUID(),
          onsessioninitialized: (sessionId) => { transports.set(sessionId, made) }
        })
        made.onclose = () => { if (made.sessionId !== undefined) transports.delete(made.sessionId) }
        conformanceServer().connect(made).then(async () => { await made.handleRequest(req, res, body) })
          .catch(() => { if (!res.headersSent) res.writeHead(500).end() })
        return
      }
      if (transport === undefined) {
        res.writeHead(id === undefined ? 400 : 404, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message: 'Invalid or missing session ID' }, id: null }))
        return
      }
      transport.handleRequest(req, res, body).catch(() => { if (!res.headersSent) res.writeHead(500).end() })
    })
  })
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve))
  let stopped: Promise<void> | undefined
  const stop = async (): Promise<void> => {
    stopped ??= (async () => {
      for (const transport of transports.values()) await transport.close()
      http.closeAllConnections()
      await new Promise((resolve) => http.close(resolve))
    })()
    await stopped
  }
  t.teardown(stop)
  return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, stop }
}
