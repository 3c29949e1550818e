import t from 'tap'
import {
  as,
  build,
  create,
  createTransaction,
  expectProblem,
  fieldsOf,
  listTransactions,
  TRANSACTIONS,
  validTransaction,
} from '../../helpers/upstream-stub.js'
import type { Transaction } from '../../../upstream-stub/src/transaction-store.js'

const cursorOf = (text: string): string => Buffer.from(text, 'utf8').toString('base64url')
const ids = (items: Transaction[]): string[] => items.map((x) => x.id)

/** Every page of a list, following next_cursor. */
async function walk (
  t: Parameters<typeof listTransactions>[0],
  app: Parameters<typeof listTransactions>[1],
  user: string,
  query: Record<string, string>
): Promise<Transaction[][]> {
  const pages: Transaction[][] = []
  let cursor: string | null = null
  do {
    const page = await listTransactions(t, app, user, cursor === null ? query : { ...query, cursor })
    pages.push(page.items)
    cursor = page.next_cursor
  } while (cursor !== null && pages.length < 100)
  return pages
}

t.test('an empty list', async (t) => {
  const app = await build(t)
  t.same(await listTransactions(t, app, 'alice'), { items: [], next_cursor: null })
})

t.test('users only see their own transactions', async (t) => {
  const app = await build(t)
  const alicesClient = await create(t, app, 'alice')
  const bobsClient = await create(t, app, 'bob')
  const alice = [
    await createTransaction(t, app, 'alice', validTransaction(alicesClient.id)),
    await createTransaction(t, app, 'alice', validTransaction(alicesClient.id, { amount: '1' })),
  ]
  const bob = [await createTransaction(t, app, 'bob', validTransaction(bobsClient.id))]

  t.same(ids((await listTransactions(t, app, 'alice')).items), ids(alice).reverse())
  t.same(ids((await listTransactions(t, app, 'bob')).items), ids(bob))
  t.same((await listTransactions(t, app, 'carol')).items, [])

  t.test('nor can they reach another user\'s through the client filter', async (t) => {
    const res = await app.inject({ method: 'GET', url: TRANSACTIONS, headers: as('bob'), query: { client_id: alicesClient.id } })
    t.same(fieldsOf(expectProblem(t, res, 400, 'VALIDATION_FAILED')), ['client_id'])
  })
})

t.test('newest first, by insertion order even within one millisecond', async (t) => {
  const frozen = new Date('2030-01-02T03:04:05.678Z')
  const app = await build(t, { now: () => frozen })
  const client = await create(t, app, 'alice')
  const created: Transaction[] = []
  for (let i = 1; i <= 5; i++) created.push(await createTransaction(t, app, 'alice', validTransaction(client.id, { amount: String(i) })))

  const { items } = await listTransactions(t, app, 'alice')
  t.same(new Set(items.map((x) => x.created_at)), new Set([frozen.toISOString()]))
  t.same(items.map((x) => x.amount), ['5', '4', '3', '2', '1'])
})

t.test('limit defaults to 50', async (t) => {
  const app = await build(t)
  const client = await create(t, app, 'alice')
  for (let i = 0; i < 51; i++) await createTransaction(t, app, 'alice', validTransaction(client.id))
  const page = await listTransactions(t, app, 'alice')
  t.equal(page.items.length, 50)
  t.type(page.next_cursor, 'string')
})

t.test('pagination walks every item exactly once, newest first', async (t) => {
  const cases: Array<[number, number]> = [
    [7, 3],
    [6, 3],
    [4, 1],
    [5, 100],
  ]
  for (const [total, limit] of cases) {
    t.test(`${total} transactions, limit ${limit}`, async (t) => {
      const app = await build(t)
      const client = await create(t, app, 'alice')
      const bobsClient = await create(t, app, 'bob')
      const created: Transaction[] = []
      for (let i = 0; i < total; i++) {
        created.push(await createTransaction(t, app, 'alice', validTransaction(client.id)))
        await createTransaction(t, app, 'bob', validTransaction(bobsClient.id)) // never in alice's pages
      }

      const pages = await walk(t, app, 'alice', { limit: String(limit) })
      t.same(
        pages.map((p) => p.length),
        Array.from({ length: Math.ceil(total / limit) }, (_, i) => Math.min(limit, total - i * limit)),
        'page sizes'
      )
      t.same(ids(pages.flat()), ids(created).reverse(), 'all items, newest first, no repeats')
    })
  }
})

t.test('filter by client_id', async (t) => {
  const app = await build(t)
  const acme = await create(t, app, 'alice')
  const globex = await create(t, app, 'alice')
  const idle = await create(t, app, 'alice')
  const byClient: Record<string, Transaction[]> = { [acme.id]: [], [globex.id]: [] }
  // Interleaved, so a filtered page has to skip the other client's entries.
  for (let i = 0; i < 5; i++) {
    for (const client of [acme, globex, acme]) {
      byClient[client.id]?.push(await createTransaction(t, app, 'alice', validTransaction(client.id)))
    }
  }

  for (const client of [acme, globex]) {
    t.test(`only ${client.id}'s, newest first, paginated`, async (t) => {
      const expected = ids(byClient[client.id] ?? []).reverse()
      const pages = await walk(t, app, 'alice', { client_id: client.id, limit: '4' })
      t.same(ids(pages.flat()), expected)
      t.ok(pages.flat().every((x) => x.client_id === client.id), 'no other client')
      t.same(pages.map((p) => p.length), Array.from({ length: Math.ceil(expected.length / 4) }, (_, i) => Math.min(4, expected.length - i * 4)))
    })
  }

  t.test('a client without transactions has an empty list', async (t) => {
    t.same(await listTransactions(t, app, 'alice', { client_id: idle.id }), { items: [], next_cursor: null })
  })

  t.test('without the filter, every client\'s', async (t) => {
    t.equal((await listTransactions(t, app, 'alice', { limit: '100' })).items.length, 15)
  })
})

t.test('an invalid client_id filter is 400 with an error for client_id', async (t) => {
  const app = await build(t)
  await create(t, app, 'alice')
  const bobs = await create(t, app, 'bob')
  const cases: Array<[string, string]> = [
    ['another user\'s client', `client_id=${bobs.id}`],
    ['an unknown id', 'client_id=00000000-0000-4000-8000-000000000000'],
    ['empty', 'client_id='],
    ['given twice', `client_id=${bobs.id}&client_id=${bobs.id}`],
    ['far too long', `client_id=${'x'.repeat(65)}`],
  ]
  for (const [label, query] of cases) {
    t.test(label, async (t) => {
      const res = await app.inject({ method: 'GET', url: `${TRANSACTIONS}?${query}`, headers: as('alice') })
      t.same(fieldsOf(expectProblem(t, res, 400, 'VALIDATION_FAILED')), ['client_id'])
    })
  }
})

t.test('limit and cursor are checked exactly as for clients', async (t) => {
  const app = await build(t)
  for (const limit of ['0', '101', '-1', '1.5', 'abc', '', '05']) {
    const res = await app.inject({ method: 'GET', url: TRANSACTIONS, headers: as('alice'), query: { limit } })
    t.same(fieldsOf(expectProblem(t, res, 400, 'VALIDATION_FAILED')), ['limit'], `limit ${JSON.stringify(limit)}`)
  }
  for (const cursor of ['', '!!!', cursorOf('seq:0'), cursorOf('seq:03'), cursorOf('id:3'), `${cursorOf('seq:3')}=`]) {
    const res = await app.inject({ method: 'GET', url: TRANSACTIONS, headers: as('alice'), query: { cursor } })
    t.same(fieldsOf(expectProblem(t, res, 400, 'VALIDATION_FAILED')), ['cursor'], `cursor ${JSON.stringify(cursor)}`)
  }
})

t.test('a forged cursor and a foreign client_id are reported together', async (t) => {
  const app = await build(t)
  const bobs = await create(t, app, 'bob')
  const res = await app.inject({
    method: 'GET',
    url: TRANSACTIONS,
    headers: as('alice'),
    query: { cursor: cursorOf('seq:abc'), client_id: bobs.id },
  })
  t.same(fieldsOf(expectProblem(t, res, 400, 'VALIDATION_FAILED')), ['client_id', 'cursor'])
})

t.test('a cursor stays valid when transactions are added between pages', async (t) => {
  const app = await build(t)
  const client = await create(t, app, 'alice')
  const created: Transaction[] = []
  for (let i = 0; i < 4; i++) created.push(await createTransaction(t, app, 'alice', validTransaction(client.id)))

  const first = await listTransactions(t, app, 'alice', { limit: '2', client_id: client.id })
  const newer = await createTransaction(t, app, 'alice', validTransaction(client.id))
  const second = await listTransactions(t, app, 'alice', { limit: '2', client_id: client.id, cursor: String(first.next_cursor) })

  t.same(ids(second.items), [created[1]?.id, created[0]?.id])
  t.equal(second.next_cursor, null)
  t.notOk(second.items.some((x) => x.id === newer.id))
})
