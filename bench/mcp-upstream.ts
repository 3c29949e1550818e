// The MCP server of --scenario mcp (e, k): answers a JSON-RPC request over Streamable HTTP the way
// an MCP server that answers with JSON does (application/json, the request's id, a tools/call
// result of one text block), and a notification with 202, and does nothing else: its CPU per
// request stays small beside the gateway's, which is what the scenario measures. It reads every
// body whole and parses it, as a server must; a body that is no JSON-RPC request is answered 400
// (the bench then reports non-2xx answers).
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/** the text of every tools/call result: an issue search's answer, of a size tools return */
const RESULT_TEXT = JSON.stringify([
  { number: 412, title: 'Retry-After ignored on 503', state: 'open', labels: ['bug'], updated: '2026-12-01T09:12:44Z' },
  { number: 398, title: 'Pagination cursor lost after a filter change', state: 'open', labels: ['bug', 'api'], updated: '2026-11-28T16:03:10Z' }
])

function answer (request: IncomingMessage, response: ServerResponse, body: Buffer): void {
  let message: { id?: unknown; method?: unknown } | null = null
  try { message = JSON.parse(body.toString('utf8')) as { id?: unknown; method?: unknown } } catch { message = null }
  if (request.method !== 'POST' || message === null || typeof message !== 'object' || typeof message.method !== 'string') {
    response.writeHead(400, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request"}}')
    return
  }
  if (message.id === undefined) {
    response.writeHead(202).end()
    return
  }
  const result = message.method === 'tools/call' ? { content: [{ type: 'text', text: RESULT_TEXT }], isError: false } : {}
  response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', id: message.id, result }))
}

export async function startMcpUpstream (): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => { answer(request, response, Buffer.concat(chunks)) })
  })
  server.keepAliveTimeout = 60_000
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => { resolve() }))
    }
  }
}
