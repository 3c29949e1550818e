// The error path nobody plans for: an unexpected throw answers 500 INTERNAL_ERROR as problem+json,
// with the x-request-id to look for in the log and none of the error's own text.
import { Writable } from 'node:stream'
import Fastify from 'fastify'
import t from 'tap'
import { problemsPlugin } from '../../../../../gateway/src/http/plugins/problems.js'

t.test('an unexpected error: 500 INTERNAL_ERROR, logged, its message never sent', async (t) => {
  const lines: string[] = []
  const stream = new Writable({ write (chunk: Buffer, _enc, done) { lines.push(chunk.toString()); done() } })
  const app = Fastify({ logger: { level: 'error', stream } })
  await app.register(problemsPlugin)
  app.get('/boom', async () => { throw new Error('secret internal detail') })
  await app.ready()
  t.teardown(async () => { await app.close() })

  const res = await app.inject('/boom')
  t.equal(res.statusCode, 500)
  t.match(res.headers['content-type'], /^application\/problem\+json/)
  t.match(res.json(), { code: 'INTERNAL_ERROR', status: 500, type: 'urn:keygate:problem:internal-error' })
  t.notOk(res.body.includes('secret internal detail'), 'the message stays out of the answer')
  t.ok(lines.some((line) => line.includes('unhandled error') && line.includes('secret internal detail')), 'and goes to the log')
})
