// A TCP relay in front of Redis that a test can cut and restore on the same port: "Redis went
// away" and "Redis came back" without touching the machine's Redis.
import { connect, createServer, type Server, type Socket } from 'node:net'

export interface Relay {
  url: string
  cut: () => Promise<void>
  restore: () => Promise<void>
}

export async function startRelay (t: { teardown: (fn: () => unknown) => void }, target: URL): Promise<Relay> {
  const sockets = new Set<Socket>()
  let server: Server | undefined
  let port = 0
  const listen = async (): Promise<void> => {
    server = createServer((client) => {
      const upstream = connect(Number(target.port), target.hostname)
      sockets.add(client).add(upstream)
      client.pipe(upstream).pipe(client)
      const drop = (): void => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream) }
      client.on('error', drop).on('close', drop)
      upstream.on('error', drop).on('close', drop)
    })
    await new Promise<void>((resolve) => server!.listen(port, '127.0.0.1', resolve))
    port = (server.address() as { port: number }).port
  }
  const cut = async (): Promise<void> => {
    const closing = server
    server = undefined
    if (closing === undefined) return
    await new Promise((resolve) => { closing.close(resolve); for (const s of sockets) s.destroy() })
  }
  await listen()
  t.teardown(cut)
  return { url: `redis://127.0.0.1:${port}`, cut, restore: listen }
}
