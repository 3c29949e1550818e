import t from 'tap'
import type { FastifyInstance } from 'fastify'
import type { Test } from 'tap'
import {
  as,
  build,
  create,
  createTransaction,
  expectProblem,
  fieldsOf,
  TRANSACTIONS,
  validTransaction,
} from '../../helpers/upstream-stub.js'
import { ISO_4217_CODES } from '../../../upstream-stub/src/currencies.js'
import type { Client } from '../../../upstream-stub/src/store.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
const UNKNOWN_ID = '00000000-0000-4000-8000-000000000000'

/** An app with one client for alice, the usual starting point. */
async function withClient (t: Test): Promise<{ app: FastifyInstance; client: Client }> {
  const app = await build(t)
  return { app, client: await create(t, app, 'alice') }
}

async function post (app: FastifyInstance, user: string, payload: unknown) {
  return app.inject({ method: 'POST', url: TRANSACTIONS, headers: as(user), payload: payload as Record<string, unknown> })
}

t.test('identity is required on every /v1/transactions/ request', async (t) => {
  const requests = [
    { method: 'POST', url: TRANSACTIONS, payload: validTransaction(UNKNOWN_ID) },
    // Identity comes before parsing: a malformed body is still 401.
    { method: 'POST', url: TRANSACTIONS, payload: '{not json', contentType: 'application/json' },
    { method: 'GET', url: TRANSACTIONS },
    { method: 'GET', url: `${TRANSACTIONS}?client_id=nope&limit=0` },
    { method: 'GET', url: `${TRANSACTIONS}${UNKNOWN_ID}` },
    { method: 'DELETE', url: TRANSACTIONS },
    { method: 'GET', url: `${TRANSACTIONS}${UNKNOWN_ID}/extra` },
  ] as const
  const identities: Array<[string, Record<string, string>]> = [
    ['absent', {}],
    ['blank', { 'x-gateway-user': ' ' }],
    ['other header', { 'x-user': 'alice' }],
  ]
  for (const r of requests) {
    for (const [label, headers] of identities) {
      t.test(`${r.method} ${r.url} with identity ${label}`, async (t) => {
        const app = await build(t)
        const contentType = 'contentType' in r ? { 'content-type': r.contentType } : {}
        const res = await app.inject({
          method: r.method,
          url: r.url,
          headers: { ...headers, ...contentType },
          ...('payload' in r ? { payload: r.payload } : {}),
        })
        expectProblem(t, res, 401, 'MISSING_IDENTITY')
      })
    }
  }
})

t.test('create returns 201 with the transaction and its Location', async (t) => {
  const { app, client } = await withClient(t)
  const before = Date.now()
  const res = await post(app, 'alice', { client_id: client.id, amount: '1234.50', currency: 'USD' })
  t.equal(res.statusCode, 201)
  t.match(res.headers['content-type'], /^application\/json/)
  const body = res.json<Record<string, unknown>>()
  t.same(Object.keys(body).sort(), ['amount', 'client_id', 'created_at', 'currency', 'id'], 'exactly the public fields')
  t.match(body, { client_id: client.id, amount: '1234.50', currency: 'USD' })
  t.match(body['id'], UUID)
  const createdAt = String(body['created_at'])
  t.equal(new Date(createdAt).toISOString(), createdAt, 'created_at is ISO 8601')
  t.ok(Date.parse(createdAt) >= before && Date.parse(createdAt) <= Date.now(), 'created_at is now')
  t.equal(res.headers['location'], `/v1/transactions/${String(body['id'])}`)

  const fetched = await app.inject({ method: 'GET', url: String(res.headers['location']), headers: as('alice') })
  t.equal(fetched.statusCode, 200)
  t.same(fetched.json(), body, 'Location resolves to the same transaction')
})

t.test('valid amounts are accepted and returned exactly as sent', async (t) => {
  const amounts = [
    '10',
    '10.5',
    '10.50',
    '1.00',
    '0.01',
    '0.1',
    '0.10',
    '0.99',
    '1',
    '100000000000000', // 15 integer digits
    // Not representable as a double (it would come back as 1000000000000000):
    // proves the amount never goes through a Number.
    '999999999999999.99',
  ]
  for (const amount of amounts) {
    t.test(JSON.stringify(amount), async (t) => {
      const { app, client } = await withClient(t)
      const created = await createTransaction(t, app, 'alice', validTransaction(client.id, { amount }))
      t.equal(created.amount, amount)
      t.type(created.amount, 'string')
    })
  }
})

t.test('invalid amounts are reported under amount', async (t) => {
  const amounts: unknown[] = [
    undefined,
    '',
    '10.555',
    '1e3',
    '1E3',
    '-5',
    '+5',
    '0',
    '0.0',
    '0.00',
    '00.50',
    '05',
    ' 5',
    '5 ',
    '5\n',
    '5.',
    '.5',
    '1,50',
    '1_000',
    '1 000',
    '0x10',
    'NaN',
    'Infinity',
    '１０', // full-width digits
    '1'.repeat(16),
    `${'1'.repeat(16)}.5`,
    10,
    10.5,
    0,
    null,
    true,
    ['10'],
    { value: '10' },
  ]
  for (const amount of amounts) {
    t.test(`amount = ${JSON.stringify(amount) ?? 'missing'}`, async (t) => {
      const { app, client } = await withClient(t)
      const problem = expectProblem(t, await post(app, 'alice', validTransaction(client.id, { amount })), 400, 'VALIDATION_FAILED')
      t.same(fieldsOf(problem), ['amount'])
      t.match(problem.errors?.[0]?.message, amount === undefined ? 'is required' : /decimal string/)
    })
  }
})

t.test('currencies: active ISO 4217 codes only, upper case', async (t) => {
  t.test('accepted', async (t) => {
    const { app, client } = await withClient(t)
    for (const currency of ['USD', 'EUR', 'GBP', 'JPY', 'CHF', 'BRL', 'XCG', 'SLE', 'ZWG', 'VED', 'XOF', 'CLF']) {
      const created = await createTransaction(t, app, 'alice', validTransaction(client.id, { currency }))
      t.equal(created.currency, currency)
    }
  })

  const refused: unknown[] = [
    undefined,
    '',
    'usd',
    'Usd',
    'XYZ',
    'US',
    'USDD',
    ' USD',
    'USD ',
    'U$D',
    // withdrawn codes
    'ANG',
    'HRK',
    'CUC',
    'SLL',
    'ZWL',
    'VEF',
    'MRO',
    'DEM',
    840,
    null,
    ['USD'],
  ]
  for (const currency of refused) {
    t.test(`refused: ${JSON.stringify(currency) ?? 'missing'}`, async (t) => {
      const { app, client } = await withClient(t)
      const res = await post(app, 'alice', validTransaction(client.id, { currency }))
      const problem = expectProblem(t, res, 400, 'VALIDATION_FAILED')
      t.same(fieldsOf(problem), ['currency'])
      t.match(problem.errors?.[0]?.message, currency === undefined ? 'is required' : /ISO 4217/)
    })
  }
})

t.test('the embedded ISO 4217 list is well formed', async (t) => {
  t.ok(ISO_4217_CODES.length > 170 && ISO_4217_CODES.length < 190, `about 180 codes (${ISO_4217_CODES.length})`)
  t.ok(ISO_4217_CODES.every((code) => /^[A-Z]{3}$/.test(code)), 'three upper-case letters each')
  t.equal(new Set(ISO_4217_CODES).size, ISO_4217_CODES.length, 'no duplicates')
  t.same([...ISO_4217_CODES].sort(), ISO_4217_CODES, 'sorted, so a diff of an update is readable')
  t.throws(() => (ISO_4217_CODES as string[]).push('XYZ'), 'frozen')
})

t.test('client_id must be one of the caller\'s own clients', async (t) => {
  const app = await build(t)
  const alices = await create(t, app, 'alice')
  const bobs = await create(t, app, 'bob')

  const cases: Array<[string, unknown]> = [
    ['missing', undefined],
    ['empty', ''],
    ['a number', 42],
    ['null', null],
    ['too long', 'x'.repeat(65)],
    ['another user\'s client', bobs.id],
    ['an unknown id', UNKNOWN_ID],
    ['not a uuid', 'nope'],
  ]
  for (const [label, clientId] of cases) {
    t.test(label, async (t) => {
      const problem = expectProblem(t, await post(app, 'alice', validTransaction(alices.id, { client_id: clientId })), 400, 'VALIDATION_FAILED')
      t.same(fieldsOf(problem), ['client_id'])
    })
  }

  t.test('another user\'s client and an unknown id get the very same answer', async (t) => {
    const foreign = await post(app, 'alice', validTransaction(bobs.id))
    const unknown = await post(app, 'alice', validTransaction(UNKNOWN_ID))
    t.same(foreign.json(), unknown.json())
    t.same(foreign.json<{ errors: unknown }>().errors, [{ field: 'client_id', message: 'is not one of your clients' }])
  })

  t.test('nothing was stored for the refused requests', async (t) => {
    const res = await app.inject({ method: 'GET', url: TRANSACTIONS, headers: as('alice') })
    t.same(res.json<{ items: unknown[] }>().items, [])
  })

  t.test('bob can use his own client', async (t) => {
    const created = await createTransaction(t, app, 'bob', validTransaction(bobs.id))
    t.equal(created.client_id, bobs.id)
  })
})

t.test('all failing fields are reported at once, ownership included', async (t) => {
  const app = await build(t)
  const alices = await create(t, app, 'alice')
  const bobs = await create(t, app, 'bob')
  const cases: Array<[string, Record<string, unknown>, string[]]> = [
    ['empty object', {}, ['amount', 'client_id', 'currency']],
    ['foreign client plus bad amount and currency', { client_id: bobs.id, amount: '1e3', currency: 'usd' }, ['amount', 'client_id', 'currency']],
    ['unknown client plus bad amount', { client_id: UNKNOWN_ID, amount: 10, currency: 'EUR' }, ['amount', 'client_id']],
    ['foreign client plus an extra property', { ...validTransaction(bobs.id), note: 'hi' }, ['client_id', 'note']],
    ['own client, everything else wrong', { client_id: alices.id, amount: '0', currency: 'XYZ', id: 'mine' }, ['amount', 'currency', 'id']],
  ]
  for (const [label, payload, fields] of cases) {
    t.test(label, async (t) => {
      const problem = expectProblem(t, await post(app, 'alice', payload), 400, 'VALIDATION_FAILED')
      t.same(fieldsOf(problem), fields)
    })
  }
})

t.test('unknown properties are rejected, not silently dropped', async (t) => {
  const { app, client } = await withClient(t)
  for (const extra of [{ id: 'mine' }, { created_at: '2000-01-01T00:00:00Z' }, { status: 'settled' }]) {
    const problem = expectProblem(t, await post(app, 'alice', { ...validTransaction(client.id), ...extra }), 400, 'VALIDATION_FAILED')
    t.same(fieldsOf(problem), Object.keys(extra))
  }
})

t.test('a body that is not a JSON object is reported under body only', async (t) => {
  const cases: Array<[string, string]> = [
    ['malformed JSON', '{"amount": "1",'],
    ['empty JSON body', ''],
    ['JSON array', '[]'],
    ['JSON string', '"10.00"'],
    ['JSON null', 'null'],
  ]
  for (const [label, payload] of cases) {
    t.test(label, async (t) => {
      const app = await build(t)
      const res = await app.inject({
        method: 'POST',
        url: TRANSACTIONS,
        headers: { ...as('alice'), 'content-type': 'application/json' },
        payload,
      })
      t.same(fieldsOf(expectProblem(t, res, 400, 'VALIDATION_FAILED')), ['body'])
    })
  }
  t.test('not JSON at all is 415', async (t) => {
    const app = await build(t)
    const res = await app.inject({
      method: 'POST',
      url: TRANSACTIONS,
      headers: { ...as('alice'), 'content-type': 'text/plain' },
      payload: 'amount=10',
    })
    expectProblem(t, res, 415, 'UNSUPPORTED_MEDIA_TYPE')
  })
})

t.test('GET /v1/transactions/<id> only finds the caller\'s own transactions', async (t) => {
  const { app, client } = await withClient(t)
  const mine = await createTransaction(t, app, 'alice', validTransaction(client.id))

  const own = await app.inject({ method: 'GET', url: `${TRANSACTIONS}${mine.id}`, headers: as('alice') })
  t.equal(own.statusCode, 200)
  t.same(own.json(), mine)

  const cases: Array<[string, string, string]> = [
    ['another user', 'bob', mine.id],
    ['unknown id', 'alice', UNKNOWN_ID],
    ['not a uuid', 'alice', 'nope'],
    // A client id is not a transaction id.
    ['a client id', 'alice', client.id],
  ]
  for (const [label, user, id] of cases) {
    const res = await app.inject({ method: 'GET', url: `${TRANSACTIONS}${id}`, headers: as(user) })
    t.test(label, async (t) => {
      expectProblem(t, res, 404, 'NOT_FOUND')
    })
  }
})

t.test('unknown routes under /v1/transactions are 404', async (t) => {
  const cases: Array<[string, string]> = [
    ['GET', '/v1/transactions'],
    ['POST', '/v1/transactions'],
    ['PUT', '/v1/transactions/'],
    ['DELETE', `/v1/transactions/${UNKNOWN_ID}`],
    ['PATCH', `/v1/transactions/${UNKNOWN_ID}`],
    ['GET', `/v1/transactions/${UNKNOWN_ID}/`],
    ['GET', `/v1/transactions/${UNKNOWN_ID}/extra`],
    ['GET', '/v1/transactionsX'],
  ]
  for (const [method, url] of cases) {
    t.test(`${method} ${url}`, async (t) => {
      const app = await build(t)
      const res = await app.inject({ method: method as 'GET', url, headers: as('alice') })
      expectProblem(t, res, 404, 'NOT_FOUND')
    })
  }
})
