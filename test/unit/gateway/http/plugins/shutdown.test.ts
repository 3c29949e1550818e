// While the gateway closes, answers to requests in flight close their connection (so the process
// can exit) and no new request is served. (A request that slips onto an open connection in that
// moment gets 503 SHUTTING_DOWN from the same plugin; Node rarely leaves such a window.)
import Fastify from 'fastify'
import t from 'tap'
import { problemsPlugin } from '../../../../../gateway/src/http/plugins/problems.js'
import { shutdownPlugin } from '../../../../../gateway/src/http/plugins/shutdown.js'

t.test('closing: in-flight answers close their connections, new requests are not served', async (t) => {
  const app = Fastify()
  await app.register(problemsPlugin)
  await app.register(shutdownPlugin)
  let release: () => void = () => {}
  app.get('/slow', async () => { await new Promise<void>((resolve) => { release = resolve }); return { ok: true } })
  app.get('/fast', async () => ({ ok: true }))
  await app.ready()
  t.equal((await app.inject('/fast')).headers.connection, 'keep-alive', 'before closing: nothing changes')

  const inFlight = app.inject('/slow')
  await new Promise((resolve) => setTimeout(resolve, 20))
  const closing = app.close()
  await new Promise((resolve) => setTimeout(resolve, 20))
  const late = await app.inject('/fast').catch((err: Error) => err)
  release()
  const done = await inFlight
  await closing
  t.equal(done.statusCode, 200, 'the request in flight completes')
  t.equal(done.headers.connection, 'close', 'and its connection is closed')
  t.ok(late instanceof Error, 'a new request is not served')
})
