import t from 'tap'
import { Semaphore, type Permit } from '../../../../gateway/src/lib/semaphore.js'

const settled = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }

/** Which of the permits have their slot (their `ready` resolved), after pending callbacks ran. */
async function holding (permits: Permit[]): Promise<boolean[]> {
  const flags = permits.map(() => false)
  permits.forEach((p, i) => { void p.ready.then(() => { flags[i] = true }) })
  await settled()
  return flags
}

t.test('at most `concurrency` hold, at most `maxWaiting` wait, and beyond that: null at once', async (t) => {
  const s = new Semaphore(2, 3)
  const permits = Array.from({ length: 5 }, () => s.tryAcquire())
  t.ok(permits.every((p) => p !== null), 'two slots and three places in the queue')
  t.equal(s.running, 2)
  t.equal(s.waiting, 3)
  t.equal(s.tryAcquire(), null, 'the sixth is refused')
  t.equal(s.tryAcquire(), null, 'and so is the seventh: the queue does not grow')
  t.equal(s.waiting, 3)
  t.same(await holding(permits as Permit[]), [true, true, false, false, false])
})

t.test('a released slot goes to the longest waiter, in order', async (t) => {
  const s = new Semaphore(1, 5)
  const permits = Array.from({ length: 4 }, () => s.tryAcquire()) as Permit[]
  const order: number[] = []
  permits.forEach((p, i) => { void p.ready.then(() => { order.push(i) }) })
  await settled()
  t.same(order, [0])
  for (let i = 0; i < 4; i++) {
    permits[i]?.release()
    await settled()
  }
  t.same(order, [0, 1, 2, 3])
  t.equal(s.running, 0)
  t.equal(s.waiting, 0)
})

t.test('a waiter that gives up leaves the queue and never gets a slot', async (t) => {
  const s = new Semaphore(1, 2)
  const [holder, quitter, next] = [s.tryAcquire(), s.tryAcquire(), s.tryAcquire()] as Permit[]
  t.equal(s.tryAcquire(), null, 'the queue is full')
  quitter!.release()
  t.equal(s.waiting, 1, 'its place is free again')
  const late = s.tryAcquire()
  t.not(late, null, 'and taken by another')
  holder!.release()
  t.same(await holding([quitter!, next!, late!]), [false, true, false], 'the slot skips the one that left')
  t.equal(s.running, 1)
})

t.test('release is idempotent: a double release frees one slot, not two', async (t) => {
  const s = new Semaphore(2, 0)
  const a = s.tryAcquire() as Permit
  const b = s.tryAcquire() as Permit
  t.equal(s.tryAcquire(), null)
  a.release()
  a.release()
  t.equal(s.running, 1)
  const c = s.tryAcquire() as Permit
  t.not(c, null)
  t.equal(s.tryAcquire(), null, 'still only two at once')
  b.release()
  c.release()
  t.equal(s.running, 0)
})

t.test('concurrency is never exceeded under churn', async (t) => {
  const s = new Semaphore(3, 10)
  let active = 0
  let peak = 0
  let refused = 0
  const work = async (): Promise<void> => {
    const permit = s.tryAcquire()
    if (permit === null) { refused++; return }
    await permit.ready
    active++
    peak = Math.max(peak, active)
    await new Promise((resolve) => setTimeout(resolve, Math.random() * 5))
    active--
    permit.release()
  }
  await Promise.all(Array.from({ length: 50 }, work))
  t.equal(peak, 3, 'three at once, never more')
  t.equal(refused, 50 - 13, 'all beyond 3 running + 10 waiting are refused')
  t.equal(s.running, 0)
  t.equal(s.waiting, 0)
})

t.test('bad limits are refused', async (t) => {
  t.throws(() => new Semaphore(0, 1), RangeError)
  t.throws(() => new Semaphore(1.5, 1), RangeError)
  t.throws(() => new Semaphore(1, -1), RangeError)
  t.doesNotThrow(() => new Semaphore(1, 0))
})
