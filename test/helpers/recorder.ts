// An upstream that records every request it receives, byte for byte, and answers 200 (or never
// answers, to test timeouts). It lets a test assert what reached the upstream, and that nothing did.
import { createServer, type IncomingHttpHeaders } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface RecordedRequest {
  method: string
  url: string
  headers: IncomingHttpHeaders
  rawHeaders: string[]
  body: Buffer
}

export interface Recorder {
  url: string
  requests: RecordedRequest[]
  /** with `hold`: answer every request held so far, and those that come later at once */
  release: () => void
}

export interface RecorderOptions {
  /** never answer (timeouts) */
  hang?: boolean
  /** answer after this many ms (requests in flight) */
  delayMs?: number
  /** reset the connection instead of answering (upstream failures) */
  reset?: boolean
  /** answer only once `release()` is called (connections held busy) */
  hold?: boolean
  /** the body of every answer (default: `{"recorded":N}`, N the requests so far) */
  body?: string | Buffer
}

export async function startRecorder (t: { teardown: (fn: () => unknown) => void }, options: RecorderOptions = {}): Promise<Recorder> {
  const requests: RecordedRequest[] = []
  let held: Array<() => void> | undefined = options.hold === true ? [] : undefined
  const release = (): void => {
    const answers = held ?? []
    held = undefined
    for (const answer of answers) answer()
  }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers, rawHeaders: req.rawHeaders, body: Buffer.concat(chunks) })
      if (options.hang === true) return
      if (options.reset === true) { req.socket.destroy(); return }
      const answer = (): void => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(options.body ?? JSON.stringify({ recorded: requests.length }))
      }
      if (held !== undefined) held.push(answer)
      else if (options.delayMs === undefined) answer()
      else setTimeout(answer, options.delayMs)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, release }
}
