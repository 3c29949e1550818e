import t from 'tap'
import { as, build, COLLECTION, create, expectProblem, fieldsOf, list, validClient } from '../../helpers/upstream-stub.js'
import type { Client } from '../../../upstream-stub/src/store.js'

const cursorOf = (text: string): string => Buffer.from(text, 'utf8').toString('base64url')

t.test('an empty list', async (t) => {
  const app = await build(t)
  t.same(await list(t, app, 'alice'), { items: [], next_cursor: null })
})

t.test('users only see their own clients', async (t) => {
  const app = await build(t)
  const alice = [await create(t, app, 'alice'), await create(t, app, 'alice')]
  const bob = [await create(t, app, 'bob')]

  const ids = (items: Client[]): string[] => items.map((c) => c.id).sort()
  t.same(ids((await list(t, app, 'alice')).items), ids(alice))
  t.same(ids((await list(t, app, 'bob')).items), ids(bob))
  t.same((await list(t, app, 'carol')).items, [])
})

t.test('newest first, by insertion order even within one millisecond', async (t) => {
  // A frozen clock makes every created_at identical, so only the insertion
  // sequence can explain the order.
  const frozen = new Date('2030-01-02T03:04:05.678Z')
  const app = await build(t, { now: () => frozen })
  const created: Client[] = []
  for (let i = 0; i < 5; i++) created.push(await create(t, app, 'alice'))

  const { items } = await list(t, app, 'alice')
  t.same(new Set(items.map((c) => c.created_at)), new Set([frozen.toISOString()]))
  t.same(
    items.map((c) => c.id),
    created.map((c) => c.id).reverse()
  )
})

t.test('limit defaults to 50', async (t) => {
  const app = await build(t)
  for (let i = 0; i < 51; i++) await create(t, app, 'alice')
  const page = await list(t, app, 'alice')
  t.equal(page.items.length, 50)
  t.type(page.next_cursor, 'string')
})

t.test('pagination walks every item exactly once, newest first', async (t) => {
  // [total, limit]: uneven last page, exact multiple (no empty trailing page),
  // one page that fits exactly, and the extremes of limit.
  const cases: Array<[number, number]> = [
    [7, 3],
    [6, 3],
    [3, 3],
    [4, 1],
    [5, 100],
  ]
  for (const [total, limit] of cases) {
    t.test(`${total} clients, limit ${limit}`, async (t) => {
      const app = await build(t)
      const created: Client[] = []
      for (let i = 0; i < total; i++) created.push(await create(t, app, 'alice'))
      await create(t, app, 'bob') // must never show up in alice's pages

      const pages: Client[][] = []
      let cursor: string | null = null
      do {
        const query: Record<string, string> = { limit: String(limit) }
        if (cursor !== null) query['cursor'] = cursor
        const page = await list(t, app, 'alice', query)
        pages.push(page.items)
        cursor = page.next_cursor
      } while (cursor !== null && pages.length <= total)

      t.same(
        pages.map((p) => p.length),
        Array.from({ length: Math.ceil(total / limit) }, (_, i) => Math.min(limit, total - i * limit)),
        'page sizes'
      )
      t.same(
        pages.flat().map((c) => c.id),
        created.map((c) => c.id).reverse(),
        'all items, newest first, no repeats'
      )
    })
  }
})

t.test('a cursor stays valid when clients are added between pages', async (t) => {
  const app = await build(t)
  const created: Client[] = []
  for (let i = 0; i < 4; i++) created.push(await create(t, app, 'alice'))

  const first = await list(t, app, 'alice', { limit: '2' })
  const newer = await create(t, app, 'alice', validClient())
  t.type(first.next_cursor, 'string')
  const second = await list(t, app, 'alice', { limit: '2', cursor: String(first.next_cursor) })

  t.same(second.items.map((c) => c.id), [created[1]?.id, created[0]?.id])
  t.equal(second.next_cursor, null)
  t.notOk(second.items.some((c) => c.id === newer.id), 'the newer client is on page one next time, not here')
})

t.test('invalid limit is 400 with an error for limit', async (t) => {
  const values = ['0', '101', '-1', '1.5', 'abc', '', '05', ' 5', '1e1', '0x10']
  for (const value of values) {
    t.test(JSON.stringify(value), async (t) => {
      const app = await build(t)
      const res = await app.inject({ method: 'GET', url: COLLECTION, headers: as('alice'), query: { limit: value } })
      const problem = expectProblem(t, res, 400, 'VALIDATION_FAILED')
      t.same(fieldsOf(problem), ['limit'])
    })
  }
  t.test('given twice', async (t) => {
    const app = await build(t)
    const res = await app.inject({ method: 'GET', url: `${COLLECTION}?limit=1&limit=2`, headers: as('alice') })
    t.same(fieldsOf(expectProblem(t, res, 400, 'VALIDATION_FAILED')), ['limit'])
  })
})

t.test('invalid or tampered cursor is 400 with an error for cursor', async (t) => {
  const values: Array<[string, string]> = [
    ['empty', ''],
    ['not base64url', '!!!'],
    ['base64url of garbage', cursorOf('hello')],
    ['wrong prefix', cursorOf('id:3')],
    ['zero', cursorOf('seq:0')],
    ['negative', cursorOf('seq:-3')],
    ['not a number', cursorOf('seq:abc')],
    ['fraction', cursorOf('seq:1.5')],
    ['leading zero', cursorOf('seq:03')],
    ['beyond safe integer', cursorOf('seq:99999999999999999')],
    ['padded', `${cursorOf('seq:3')}=`],
    ['trailing junk', `${cursorOf('seq:3')}A`],
    ['standard base64 alphabet', Buffer.from('seq:1>?').toString('base64')],
    ['far too long', 'A'.repeat(200)],
  ]
  for (const [label, cursor] of values) {
    t.test(label, async (t) => {
      const app = await build(t)
      await create(t, app, 'alice')
      const res = await app.inject({ method: 'GET', url: COLLECTION, headers: as('alice'), query: { cursor } })
      const problem = expectProblem(t, res, 400, 'VALIDATION_FAILED')
      t.same(fieldsOf(problem), ['cursor'])
    })
  }
})

t.test('bad limit and bad cursor together are both reported', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: COLLECTION, headers: as('alice'), query: { limit: '0', cursor: '***' } })
  t.same(fieldsOf(expectProblem(t, res, 400, 'VALIDATION_FAILED')), ['cursor', 'limit'])
})

t.test('unknown query parameters are ignored', async (t) => {
  const app = await build(t)
  await create(t, app, 'alice')
  t.equal((await list(t, app, 'alice', { sort: 'name' })).items.length, 1)
})
