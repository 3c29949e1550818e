// HTTP over real sockets with the request target sent exactly as given: fetch and URL would
// normalise paths and queries, which is precisely what these tests must control.
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { connect } from 'node:net'

export interface RawResponse {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
  text: string
  json: <T = Record<string, unknown>>() => T
}

export interface RawRequestOptions {
  method?: string
  headers?: Record<string, string | string[]>
  body?: string | Buffer
  /** the client address to send from (Linux routes all of 127/8 to loopback: 127.0.0.2, 127.0.0.3, ...) */
  localAddress?: string
}

function toResponse (status: number, headers: IncomingHttpHeaders, body: Buffer): RawResponse {
  const text = body.toString('utf8')
  return { status, headers, body, text, json: <T>() => JSON.parse(text) as T }
}

/** One request to `baseUrl` with `target` (path + query) sent verbatim. */
export async function send (baseUrl: string, target: string, options: RawRequestOptions = {}): Promise<RawResponse> {
  const { hostname, port } = new URL(baseUrl)
  const body = options.body === undefined ? undefined : Buffer.from(options.body)
  const headers: Record<string, string | string[]> = { ...options.headers }
  if (body !== undefined && !Object.keys(headers).some((h) => h.toLowerCase() === 'content-length')) headers['content-length'] = String(body.length)
  return await new Promise((resolve, reject) => {
    const from = options.localAddress === undefined ? {} : { localAddress: options.localAddress }
    const req = httpRequest({ host: hostname, port, method: options.method ?? 'GET', path: target, headers, agent: false, ...from }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => { resolve(toResponse(res.statusCode ?? 0, res.headers, Buffer.concat(chunks))) })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(body)
  })
}

/**
 * Writes raw bytes to the server and returns the status line's code and the whole answer. The
 * socket is not half-closed (Node's server would abort the request); send `Connection: close`.
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
