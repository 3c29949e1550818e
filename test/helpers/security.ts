// Shared tools of the security tests: raw HTTP/1.1 exchanges on sockets (several responses per
// connection, interim 1xx skipped, truncated requests), a bounded parallel runner, unique
// timestamps (so that no two signed requests of a run are byte-identical replays) and counters.
import { createHash } from 'node:crypto'
import { request as httpRequest, Agent, type IncomingHttpHeaders } from 'node:http'
import { connect } from 'node:net'

export const sha256 = (bytes: Buffer | string): string => createHash('sha256').update(bytes).digest('hex')

/** Strictly increasing millisecond timestamps near now: every signed request of a test is unique. */
let lastTimestamp = 0
export function uniqueTimestamp (): number {
  lastTimestamp = Math.max(Date.now(), lastTimestamp + 1)
  return lastTimestamp
}

export interface ParsedResponse {
  status: number
  headers: Record<string, string>
  body: Buffer
}

export interface Exchange {
  /** every complete response read from the connection, in order (1xx interim answers left out) */
  responses: ParsedResponse[]
  /** bytes left after the last complete response (a response cut short) */
  rest: Buffer
  /** the socket ended or was reset before any complete response */
  closedWithoutAnswer: boolean
  /** a socket error (ECONNRESET, EPIPE), if any */
  error: string | undefined
  /** no close within the time allowed */
  timedOut: boolean
  raw: Buffer
}

function indexOfCrlfCrlf (buffer: Buffer, from: number): number {
  return buffer.indexOf('\r\n\r\n', from, 'latin1')
}

/**
 * Splits a byte stream into HTTP/1.1 responses. Bodies by Content-Length, by chunked coding,
 * or (neither) to the end of the stream. A response that is not complete stays in `rest`.
 */
export function parseResponses (raw: Buffer, streamEnded = true): { responses: ParsedResponse[]; rest: Buffer } {
  const responses: ParsedResponse[] = []
  let offset = 0
  while (offset < raw.length) {
    const headEnd = indexOfCrlfCrlf(raw, offset)
    if (headEnd === -1) break
    const head = raw.subarray(offset, headEnd).toString('latin1').split('\r\n')
    const statusMatch = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '')
    if (statusMatch === null) break
    const status = Number(statusMatch[1])
    const headers: Record<string, string> = {}
    for (const line of head.slice(1)) {
      const colon = line.indexOf(':')
      if (colon <= 0) continue
      const name = line.slice(0, colon).trim().toLowerCase()
      const value = line.slice(colon + 1).trim()
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value
    }
    let cursor = headEnd + 4
    let body: Buffer
    if (status >= 100 && status < 200) {
      offset = cursor
      continue
    }
    if (headers['transfer-encoding']?.toLowerCase().includes('chunked') === true) {
      const parts: Buffer[] = []
      let complete = false
      for (;;) {
        const lineEnd = raw.indexOf('\r\n', cursor, 'latin1')
        if (lineEnd === -1) break
        const size = parseInt(raw.subarray(cursor, lineEnd).toString('latin1'), 16)
        if (Number.isNaN(size)) break
        if (size === 0) {
          const trailerEnd = raw.indexOf('\r\n', lineEnd + 2, 'latin1')
          if (trailerEnd === -1) break
          cursor = trailerEnd + 2
          complete = true
          break
        }
        if (lineEnd + 2 + size + 2 > raw.length) break
        parts.push(raw.subarray(lineEnd + 2, lineEnd + 2 + size))
        cursor = lineEnd + 2 + size + 2
      }
      if (!complete) break
      body = Buffer.concat(parts)
    } else if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length'])
      if (cursor + length > raw.length) break
      body = raw.subarray(cursor, cursor + length)
      cursor += length
    } else {
      if (!streamEnded) break
      body = raw.subarray(cursor)
      cursor = raw.length
    }
    responses.push({ status, headers, body })
    offset = cursor
  }
  return { responses, rest: raw.subarray(offset) }
}

export interface ExchangeOptions {
  /** after writing, half-close the socket (a client that sends less than it declared, then closes) */
  halfClose?: boolean
  timeoutMs?: number
  /** stop (and close the socket) once this many complete responses are read: for keep-alive requests */
  untilResponses?: number
}

/** Writes `bytes` on a new connection and reads until the server closes it (or the time is up). */
export async function exchange (baseUrl: string, bytes: string | Buffer, options: ExchangeOptions = {}): Promise<Exchange> {
  const { hostname, port } = new URL(baseUrl)
  return await new Promise((resolve) => {
    const socket = connect(Number(port), hostname)
    const chunks: Buffer[] = []
    let error: string | undefined
    let timedOut = false
    let done = false
    const finish = (): void => {
      if (done) return
      done = true
      clearTimeout(timer)
      const raw = Buffer.concat(chunks)
      const { responses, rest } = parseResponses(raw)
      resolve({ responses, rest, closedWithoutAnswer: responses.length === 0, error, timedOut, raw })
    }
    const timer = setTimeout(() => { timedOut = true; socket.destroy(); finish() }, options.timeoutMs ?? 10_000)
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk)
      if (options.untilResponses !== undefined && parseResponses(Buffer.concat(chunks), false).responses.length >= options.untilResponses) {
        socket.destroy()
      }
    })
    socket.on('error', (err: NodeJS.ErrnoException) => { error = err.code ?? err.message })
    socket.on('close', finish)
    socket.write(bytes, () => {
      if (options.halfClose === true) socket.end()
    })
  })
}

export interface HttpAnswer {
  status: number
  headers: IncomingHttpHeaders
  body: Buffer
}

/** One request on a given agent (keep-alive), target sent verbatim. */
export async function sendOn (
  agent: Agent,
  baseUrl: string,
  target: string,
  options: { method: string; headers: Record<string, string>; body?: Buffer }
): Promise<HttpAnswer> {
  const { hostname, port } = new URL(baseUrl)
  const headers = { ...options.headers }
  if (options.body !== undefined) headers['content-length'] = String(options.body.length)
  return await new Promise((resolve, reject) => {
    const req = httpRequest({ host: hostname, port, method: options.method, path: target, headers, agent }, (res) => {
      const chunks: Buffer[] = []
      res.on('data', (chunk: Buffer) => chunks.push(chunk))
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }) })
      res.on('error', reject)
    })
    req.on('error', reject)
    req.end(options.body)
  })
}

/** Runs `task` over `items` with at most `concurrency` in flight; results in input order. */
export async function pool<T, R> (items: readonly T[], concurrency: number, task: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length)
  let next = 0
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++
      results[index] = await task(items[index] as T, index)
    }
  }
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker))
  return results
}

/** "401: 12, 400: 3" style tallies, sorted by key. */
export class Tally {
  readonly counts = new Map<string, number>()
  add (key: string | number, by = 1): void {
    const k = String(key)
    this.counts.set(k, (this.counts.get(k) ?? 0) + by)
  }

  get (key: string | number): number { return this.counts.get(String(key)) ?? 0 }
  get total (): number { return [...this.counts.values()].reduce((a, b) => a + b, 0) }
  toString (): string {
    return [...this.counts.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}: ${v}`).join(', ')
  }
}

/** The header lines of a request, CRLF-terminated, from name/value pairs (duplicates kept). */
export function headerLines (pairs: ReadonlyArray<readonly [string, string]>): string {
  return pairs.map(([name, value]) => `${name}: ${value}\r\n`).join('')
}

/** Names in a recorded request's rawHeaders (every other entry), lower-cased. */
export function rawHeaderNames (rawHeaders: readonly string[]): string[] {
  return rawHeaders.filter((_, i) => i % 2 === 0).map((h) => h.toLowerCase())
}
