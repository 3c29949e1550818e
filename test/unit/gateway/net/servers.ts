// The servers guardedFetch's tests fetch from: HTTPS on a given address of this machine (a test
// certificate for agent.test), counting the TCP connections each receives.
import { createServer as createHttpsServer } from 'node:https'
import type { IncomingMessage, ServerResponse } from 'node:http'
import { createServer as createTcpServer, type Server } from 'node:net'
import { testCertificates } from '../../../helpers/test-ca.js'

/** the names the test certificate holds */
export const TEST_NAMES = ['agent.test', 'other.test'] as const
export const certificates = (): ReturnType<typeof testCertificates> => testCertificates(TEST_NAMES)

export interface TestServer {
  port: number
  /** TCP connections accepted so far */
  connections: () => number
  close: () => Promise<void>
}

async function listen (server: Server, host: string, port: number): Promise<TestServer> {
  let connections = 0
  server.on('connection', (socket) => {
    connections++
    socket.on('error', () => undefined)
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => resolve())
  })
  const address = server.address()
  if (address === null || typeof address === 'string') throw new Error('no port')
  return {
    port: address.port,
    connections: () => connections,
    close: async () => {
      (server as Server & { closeAllConnections?: () => void }).closeAllConnections?.()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    }
  }
}

/** An HTTPS server on host:port (0: a free one) serving agent.test's certificate. */
export async function startHttpsServer (
  host: string, port: number, handler: (req: IncomingMessage, res: ServerResponse) => void
): Promise<TestServer> {
  const { certPem, keyPem } = certificates()
  return await listen(createHttpsServer({ cert: certPem, key: keyPem }, handler), host, port)
}

/** A TCP server that accepts connections and never says a byte (no TLS handshake, no answer). */
export async function startSilentServer (host: string, port: number): Promise<TestServer> {
  const sockets = new Set<import('node:net').Socket>()
  const server = createTcpServer((socket) => {
    sockets.add(socket)
    socket.on('close', () => sockets.delete(socket))
  })
  const started = await listen(server, host, port)
  return { ...started, close: async () => { for (const socket of sockets) socket.destroy(); await started.close() } }
}
