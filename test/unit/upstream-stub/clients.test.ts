import t from 'tap'
import { as, build, COLLECTION, create, expectProblem, fieldsOf, validClient } from '../../helpers/upstream-stub.js'

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/

t.test('identity is required on every /v1/clients/ request', async (t) => {
  const requests = [
    { method: 'POST', url: COLLECTION, payload: validClient() },
    // A malformed body must still be rejected as 401 first: identity comes before parsing.
    { method: 'POST', url: COLLECTION, payload: '{not json', contentType: 'application/json' },
    { method: 'GET', url: COLLECTION },
    { method: 'GET', url: `${COLLECTION}?limit=nope` },
    { method: 'GET', url: `${COLLECTION}00000000-0000-4000-8000-000000000000` },
    { method: 'DELETE', url: COLLECTION },
  ] as const
  const identities: Array<[string, Record<string, string>]> = [
    ['absent', {}],
    ['empty', { 'x-gateway-user': '' }],
    ['blank', { 'x-gateway-user': '   ' }],
    // Only the gateway header counts, not look-alikes a client could send.
    ['other header', { 'x-user': 'alice', authorization: 'Bearer alice' }],
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

t.test('create returns 201 with the client and its Location', async (t) => {
  const app = await build(t)
  const before = Date.now()
  const res = await app.inject({
    method: 'POST',
    url: COLLECTION,
    headers: as('alice'),
    payload: { name: '  Acme Ltd  ', email: 'billing@acme.example', tax_id: '12345678' },
  })
  t.equal(res.statusCode, 201)
  t.match(res.headers['content-type'], /^application\/json/)
  const body = res.json<Record<string, unknown>>()
  t.same(Object.keys(body).sort(), ['created_at', 'email', 'id', 'name', 'tax_id'], 'exactly the public fields')
  t.match(body, { name: 'Acme Ltd', email: 'billing@acme.example', tax_id: '12345678' }, 'name is trimmed')
  t.match(body['id'], UUID)
  const createdAt = String(body['created_at'])
  t.equal(new Date(createdAt).toISOString(), createdAt, 'created_at is ISO 8601')
  t.ok(Date.parse(createdAt) >= before && Date.parse(createdAt) <= Date.now(), 'created_at is now')
  t.equal(res.headers['location'], `/v1/clients/${String(body['id'])}`)

  const fetched = await app.inject({ method: 'GET', url: String(res.headers['location']), headers: as('alice') })
  t.equal(fetched.statusCode, 200)
  t.same(fetched.json(), body, 'Location resolves to the same client')
})

t.test('boundary values are accepted', async (t) => {
  const cases: Array<[string, Record<string, unknown>]> = [
    ['1-char name', { name: 'X' }],
    ['200-char name', { name: 'n'.repeat(200) }],
    ['5-digit tax_id', { tax_id: '00001' }],
    ['20-digit tax_id', { tax_id: '9'.repeat(20) }],
    ['e-mail with plus, dots and subdomain', { email: 'first.last+tag@mail.sub.example.co' }],
    ['e-mail with hyphenated domain', { email: 'a@my-company.example' }],
  ]
  for (const [label, overrides] of cases) {
    t.test(label, async (t) => {
      const app = await build(t)
      const res = await app.inject({ method: 'POST', url: COLLECTION, headers: as('alice'), payload: validClient(overrides) })
      t.equal(res.statusCode, 201)
    })
  }
})

t.test('each invalid field is reported under its own name', async (t) => {
  const invalid: Record<'name' | 'email' | 'tax_id', unknown[]> = {
    name: [undefined, '', '   ', '\t\n', 'n'.repeat(201), 42, null, ['Ada']],
    email: [
      undefined,
      '',
      'not-an-email',
      'ada@',
      '@example.com',
      'ada@example',
      'ada@@example.com',
      'ada lovelace@example.com',
      'ada@-example.com',
      'ada@example..com',
      `${'a'.repeat(250)}@example.com`,
      7,
    ],
    tax_id: [undefined, '', '1234', '1'.repeat(21), '12a45', '12 345', '-12345', '12345.0', 12345, true],
  }
  for (const [field, values] of Object.entries(invalid)) {
    for (const value of values) {
      t.test(`${field} = ${JSON.stringify(value) ?? 'missing'}`, async (t) => {
        const app = await build(t)
        // JSON drops undefined, which is how "missing" is expressed.
        const res = await app.inject({
          method: 'POST',
          url: COLLECTION,
          headers: as('alice'),
          payload: validClient({ [field]: value }),
        })
        const problem = expectProblem(t, res, 400, 'VALIDATION_FAILED')
        t.same(fieldsOf(problem), [field])
        t.type(problem.errors?.[0]?.message, 'string')
      })
    }
  }
})

t.test('all failing fields are reported at once, one entry each', async (t) => {
  const cases: Array<[string, Record<string, unknown>, string[]]> = [
    ['empty object', {}, ['email', 'name', 'tax_id']],
    ['all wrong', { name: ' ', email: 'x', tax_id: 'abc' }, ['email', 'name', 'tax_id']],
    ['two wrong', { name: 'Ada', email: 'x', tax_id: 1 }, ['email', 'tax_id']],
    ['all wrong plus extras', { name: '', email: 1, tax_id: '1', role: 'admin', 'a/b': 1 }, ['a/b', 'email', 'name', 'role', 'tax_id']],
  ]
  for (const [label, payload, fields] of cases) {
    t.test(label, async (t) => {
      const app = await build(t)
      const res = await app.inject({ method: 'POST', url: COLLECTION, headers: as('alice'), payload })
      const problem = expectProblem(t, res, 400, 'VALIDATION_FAILED')
      t.same(fieldsOf(problem), fields)
    })
  }
})

t.test('unknown properties are rejected, not silently dropped', async (t) => {
  const extras: Array<Record<string, unknown>> = [{ id: 'mine' }, { created_at: '2000-01-01T00:00:00Z' }, { admin: true }]
  for (const extra of extras) {
    t.test(Object.keys(extra).join(','), async (t) => {
      const app = await build(t)
      const res = await app.inject({
        method: 'POST',
        url: COLLECTION,
        headers: as('alice'),
        payload: { ...validClient(), ...extra },
      })
      const problem = expectProblem(t, res, 400, 'VALIDATION_FAILED')
      t.same(fieldsOf(problem), Object.keys(extra))
    })
  }
})

t.test('a body that is not a JSON object', async (t) => {
  const cases: Array<[string, Record<string, string>, string | undefined]> = [
    ['malformed JSON', { 'content-type': 'application/json' }, '{"name": "Ada",'],
    ['empty JSON body', { 'content-type': 'application/json' }, ''],
    ['no body at all', {}, undefined],
    ['JSON array', { 'content-type': 'application/json' }, '[]'],
    ['JSON string', { 'content-type': 'application/json' }, '"Ada"'],
    ['JSON null', { 'content-type': 'application/json' }, 'null'],
    ['prototype pollution attempt', { 'content-type': 'application/json' }, '{"__proto__": {"admin": true}}'],
  ]
  for (const [label, headers, payload] of cases) {
    t.test(label, async (t) => {
      const app = await build(t)
      const res = await app.inject({
        method: 'POST',
        url: COLLECTION,
        headers: { ...as('alice'), ...headers },
        ...(payload === undefined ? {} : { payload }),
      })
      const problem = expectProblem(t, res, 400, 'VALIDATION_FAILED')
      t.same(fieldsOf(problem), ['body'])
    })
  }
})

t.test('a body that is not JSON at all is 415', async (t) => {
  const cases: Array<[string, string]> = [
    ['text/plain', 'name=Ada'],
    ['application/x-www-form-urlencoded', 'name=Ada&email=ada%40example.com&tax_id=12345'],
    ['application/xml', '<client/>'],
  ]
  for (const [contentType, payload] of cases) {
    t.test(contentType, async (t) => {
      const app = await build(t)
      const res = await app.inject({
        method: 'POST',
        url: COLLECTION,
        headers: { ...as('alice'), 'content-type': contentType },
        payload,
      })
      expectProblem(t, res, 415, 'UNSUPPORTED_MEDIA_TYPE')
    })
  }
})

t.test('an oversized body is 413', async (t) => {
  const app = await build(t)
  const res = await app.inject({
    method: 'POST',
    url: COLLECTION,
    headers: as('alice'),
    payload: validClient({ name: 'n'.repeat(20_000) }),
  })
  expectProblem(t, res, 413, 'PAYLOAD_TOO_LARGE')
})

t.test('tax_id is unique per user, not globally', async (t) => {
  const app = await build(t)
  const first = await create(t, app, 'alice', validClient({ tax_id: '55555' }))

  const again = await app.inject({
    method: 'POST',
    url: COLLECTION,
    headers: as('alice'),
    payload: validClient({ tax_id: '55555', name: 'Someone else', email: 'other@example.com' }),
  })
  expectProblem(t, again, 409, 'CLIENT_EXISTS')

  const bob = await create(t, app, 'bob', validClient({ tax_id: '55555' }))
  t.not(bob.id, first.id)

  // The rejected duplicate must not have been stored.
  const res = await app.inject({ method: 'GET', url: COLLECTION, headers: as('alice') })
  t.equal(res.json<{ items: unknown[] }>().items.length, 1)
})

t.test('GET /v1/clients/<id> only finds the caller\'s own clients', async (t) => {
  const app = await build(t)
  const mine = await create(t, app, 'alice')

  const own = await app.inject({ method: 'GET', url: `${COLLECTION}${mine.id}`, headers: as('alice') })
  t.equal(own.statusCode, 200)
  t.same(own.json(), mine)

  const cases: Array<[string, string, string]> = [
    ['another user', 'bob', mine.id],
    ['unknown id', 'alice', '00000000-0000-4000-8000-000000000000'],
    ['not a uuid', 'alice', 'nope'],
  ]
  for (const [label, user, id] of cases) {
    const res = await app.inject({ method: 'GET', url: `${COLLECTION}${id}`, headers: as(user) })
    t.test(label, async (t) => {
      expectProblem(t, res, 404, 'NOT_FOUND')
    })
  }
})
