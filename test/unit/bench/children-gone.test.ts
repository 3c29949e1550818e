// The bench's processes may go away before it asks anything of them (Ctrl-C reaches every process
// of the terminal's group at once): a message to one that is gone is dropped (bench/ipc.ts), never
// an ERR_IPC_CHANNEL_CLOSED thrown or an 'error' event nobody handles, and what waited for its
// answer is told at once. The real flooder (bench/flood-child.ts), killed; a real child that exits.
import { execFileSync, fork } from 'node:child_process'
import t from 'tap'
import { startFlood } from '../../../bench/flood.js'
import { sendIfConnected } from '../../../bench/ipc.js'

t.test('sendIfConnected: false for a child that exited, with no error event', async (t) => {
  const child = fork('-e', [], { execArgv: ['-e', 'process.exit(0)'], stdio: ['ignore', 'ignore', 'ignore', 'ipc'] })
  const errors: Error[] = []
  child.on('error', (err) => { errors.push(err) })
  await new Promise((resolve) => child.once('exit', resolve))
  t.equal(sendIfConnected(child, { type: 'stop' }), false, 'not sent')
  // a raw send would throw or emit ERR_IPC_CHANNEL_CLOSED on the next tick
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.same(errors, [], 'no error event')
  t.equal(sendIfConnected({ connected: false }, {}), false, 'a process without a channel: nothing sent')
})

t.test('the flooder killed first: mark() drops its message, stop() rejects at once', async (t) => {
  // a port nothing listens on: the flooder counts refused connections, which is enough here
  const flood = await startFlood({ url: 'http://127.0.0.1:9', connections: 1, path: '/', headers: {} })
  // this process's own child
  const flooders = execFileSync('pgrep', ['-P', String(process.pid), '-f', 'flood-child'], { encoding: 'utf8' }).trim().split('\n').map(Number)
  t.ok(flooders.length > 0, 'the flooder runs')
  const unhandled: unknown[] = []
  const onError = (err: unknown): void => { unhandled.push(err) }
  process.on('uncaughtException', onError)
  t.teardown(() => { process.off('uncaughtException', onError) })
  for (const pid of flooders) process.kill(pid, 'SIGKILL')
  await new Promise((resolve) => setTimeout(resolve, 300))
  t.doesNotThrow(() => { flood.mark() }, 'mark: dropped')
  const started = Date.now()
  await t.rejects(flood.stop(), /the flooder exited/, 'stop: no result, said at once')
  t.ok(Date.now() - started < 1000, 'without waiting for an answer that cannot come')
  await new Promise((resolve) => setTimeout(resolve, 50))
  t.same(unhandled, [], 'no uncaught ERR_IPC_CHANNEL_CLOSED or EPIPE')
})
