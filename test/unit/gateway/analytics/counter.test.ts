// Usage counts land in the minute (and the hour) in which keygate answered the request, by the
// counting process's clock, not in those of the flush that writes them: a flush minutes later, or
// one that writes several minutes at once, adds each minute's counts to its own bucket. On both
// stores, read back as the admin API reads them (usageSeries), with the counter's clock in hand.
import t from 'tap'
import { NONE } from '../../../../gateway/src/analytics/buckets.js'
import { createUsageCounter } from '../../../../gateway/src/analytics/counter.js'
import { usageSeries } from '../../../../gateway/src/analytics/read.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import type { Store } from '../../../../gateway/src/store/index.js'
import { testRedisStore } from '../../../helpers/redis.js'

const KEY = 'b'.repeat(64)
const MINUTE = 60_000
const HOUR = 3_600_000

/** each store, keeping time by `now` where it can (Redis expires by its own clock: `now` stays near it) */
const STORES: Record<string, (t: { teardown: (fn: () => unknown) => void }, now: () => number) => Promise<Store>> = {
  memory: async (_t, now) => createMemoryStore(now),
  redis: async (t) => await testRedisStore(t, 'usage-minutes')
}

for (const [kind, make] of Object.entries(STORES)) {
  t.test(`${kind}: each request in the minute and the hour it was answered in; none in the minute of the flush`, async (t) => {
    // 10 s into a minute of ten minutes ago: the buckets are well within their retention
    let clock = Math.floor(Date.now() / MINUTE) * MINUTE - 10 * MINUTE + 10_000
    const now = (): number => clock
    const store = await make(t, now)
    const counter = createUsageCounter({ store, flushMs: HOUR, maxSeries: 100, now })
    t.teardown(async () => { await counter.close() })

    const answered: number[] = []
    const answer = (status: number, code: string): void => {
      counter.count(KEY, 'alice', 'clients', status, code)
      answered.push(clock)
    }
    const first = clock
    answer(200, NONE)
    clock += 45_000 // 55 s into the same minute
    answer(401, 'INVALID_SIGNATURE')
    clock += MINUTE // the next minute
    answer(200, NONE)
    clock += 2 * MINUTE + 10_000 // three minutes after the first: the flush writes the two minutes at once
    const flushed = clock
    await counter.flush()

    const minutes = await usageSeries(store, { by: 'key', name: KEY, since: '5m', windowMs: 5 * MINUTE }, clock)
    const counted = minutes.points.filter((point) => point.requests > 0)
      .map((point) => [point.at, point.requests, point.refusals])
    const minuteOf = (ms: number): string => new Date(ms - (ms % MINUTE)).toISOString()
    t.same(counted, [[minuteOf(first), 2, 1], [minuteOf(first + MINUTE), 1, 0]], 'two in the first minute (one refused), one in the next')
    t.equal(minutes.points.find((point) => point.at === minuteOf(flushed))?.requests, 0, 'none in the minute of the flush')

    // the hours: 7h is read hour by hour; the three requests in the hour (or hours) each was answered in
    const hours = await usageSeries(store, { by: 'key', name: KEY, since: '7h', windowMs: 7 * HOUR }, clock)
    const hourOf = (ms: number): string => new Date(ms - (ms % HOUR)).toISOString()
    const expected = new Map<string, number>()
    for (const at of answered) expected.set(hourOf(at), (expected.get(hourOf(at)) ?? 0) + 1)
    t.same(hours.points.filter((point) => point.requests > 0).map((point) => [point.at, point.requests]), [...expected])
  })
}
