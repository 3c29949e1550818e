import t from 'tap'
import { startUpstream } from '../../../upstream-stub/src/server.js'
import type { ProblemBody } from '../../../upstream-stub/src/problem.js'
import type { Client } from '../../../upstream-stub/src/store.js'

t.test('serves the clients and transactions API over a real socket', async (t) => {
  const upstream = await startUpstream({ port: 0, host: '127.0.0.1', logger: false })
  t.teardown(() => upstream.close())
  t.match(upstream.url, /^http:\/\/127\.0\.0\.1:\d+$/)
  const collection = `${upstream.url}/v1/clients/`

  const anonymous = await fetch(collection)
  t.equal(anonymous.status, 401)
  t.match(anonymous.headers.get('content-type'), /^application\/problem\+json/)
  t.equal((await anonymous.json() as ProblemBody).code, 'MISSING_IDENTITY')

  const created = await fetch(collection, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gateway-user': 'alice' },
    body: JSON.stringify({ name: 'Ada', email: 'ada@example.com', tax_id: '123456' }),
  })
  t.equal(created.status, 201)
  const client = await created.json() as Client
  t.equal(created.headers.get('location'), `/v1/clients/${client.id}`)

  const listed = await fetch(collection, { headers: { 'x-gateway-user': 'alice' } })
  t.equal(listed.status, 200)
  t.same(await listed.json(), { items: [client], next_cursor: null })

  const transaction = await fetch(`${upstream.url}/v1/transactions/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-gateway-user': 'alice' },
    body: JSON.stringify({ client_id: client.id, amount: '12.30', currency: 'EUR' }),
  })
  t.equal(transaction.status, 201)
  t.match(await transaction.json(), { client_id: client.id, amount: '12.30', currency: 'EUR' })

  const unknown = await fetch(`${upstream.url}/nowhere`)
  t.equal(unknown.status, 404)
  t.equal((await unknown.json() as ProblemBody).code, 'NOT_FOUND')
})

t.test('close releases the port', async (t) => {
  const upstream = await startUpstream({ port: 0, host: '127.0.0.1', logger: false })
  await upstream.close()
  await t.rejects(fetch(`${upstream.url}/v1/clients/`))
})
