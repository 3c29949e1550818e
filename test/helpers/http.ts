// HTTP over real sockets with the request target sent exactly as given: fetch and URL would
// normalise paths and queries, which is precisely what these tests must control.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { connect } from 'node:net'

export interface RawResponse {
  status: number
  headers: IncomingHttpHeaders
  /** each field's lines as sent (send only): two WWW-Authenticate fields stay two */
  distinct?: NodeJS.Dict<string[]>
  body: Buffer
  text: string
  json: <T = Record<string, unknown>>() => T
}

export interface RawRequestOptions {
  method?: string
  headers?: Record<string, string | string[]>
  body?: string | Buffer
  /** the client socket's own address (another loopback address, 127.0.0.2, is another client) */
  localAddress?: string
}

function toResponse (status: number, headers: IncomingHttpHeaders, body: Buffer, distinct?: NodeJS.Dict<string[]>): RawResponse {
  const text = body.toString('utf8')
  return { status, headers, ...(distinct !== undefined && { distinct }), body, text, json: <T>() => JSON.parse(text) as T }
}

/** One request to `baseUrl` with `target` (path + query) sent verbatim. */
export async function send (baseUrl: string, target: string, options: RawRequestOptions = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl)
  const body = options.body === undefined ? undefined : Buffer.from(options.body)
  const headers: Record<string, string | string[]> = { ...options.headers }
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length')) headers['content-length'] = String(body.length)
  return await new Promise((resolve, reject) => {
    const local = options.localAddress === undefined ? {} : { localAddress: options.localAddress }
    const req = httpRequest({ host: hostname, port, method: options.method ?? 'GET', path: target, headers, agent: false, ...local }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => { resolve(toResponse(res.statusCode ?? 0, res.headers, Buffer.concat(chunks), res.headersDistinct)) })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

/**
 * Writes raw bytes to the server and returns the status line's code and the whole answer. The
 * socket is not half-closed (sendHalfClosed does that); send `Connection: close`.
 */
export async function sendRaw (baseUrl: string, bytes: string | Buffer): Promise<{ status: number; text: string }> {
  const { hostname, port } = new URL(baseUrl)
  return await new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    const chunks: Buffer[] = []
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('end', () => {
      const text = Buffer.concat(chunks).toString('latin1')
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text })
    })
    socket.setTimeout(10_000, () => socket.destroy(new Error('no answer within 10 s')))
    socket.write(bytes)
  })
}

export interface HalfClosedAnswer { status: number; text: string; closedByServer: boolean }

/**
 * Writes raw bytes, then half-closes the connection (a FIN: `socket.end()`, as `nc -N` and many
 * scripts do) and reads the whole answer until the server closes its side. `closedByServer`: the
 * server ended the connection (rather than the timeout).
 */
export async function sendHalfClosed (baseUrl: string, bytes: string | Buffer, timeoutMs = 10_000): Promise<HalfClosedAnswer> {
  const { hostname, port } = new URL(baseUrl)
  return await new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname)
    const chunks: Buffer[] = []
    let closedByServer = false
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('end', () => { closedByServer = true })
    socket.on('error', reject)
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1')
      resolve({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0), text, closedByServer })
    })
    socket.setTimeout(timeoutMs, () => socket.destroy())
    socket.end(bytes)
  })
}

/** A request as raw HTTP/1.1 bytes: the request line as given, the headers, a Content-Length for a body. */
export function rawRequest (method: string, target: string, headers: Record<string, string> = {}, body?: string): string {
  const lines = [`${method} ${target} HTTP/1.1`, 'Host: keygate.test', ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`)]
  if (body !== undefined) lines.push(`Content-Length: ${Buffer.byteLength(body)}`)
  return `${lines.join('\r\n')}\r\n\r\n${body ?? ''}`
}
