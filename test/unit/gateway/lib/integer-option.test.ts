// The one check of whole-number options (semaphore, login guard, signature budget).
import t from 'tap'
import { integerOption } from '../../../../gateway/src/lib/integer-option.js'
import { Semaphore } from '../../../../gateway/src/lib/semaphore.js'
import { signatureBudgetLimits } from '../../../../gateway/src/auth/signature-budget.js'

t.test('a whole number at or above the minimum is returned as given', async (t) => {
  t.equal(integerOption('limit', 0, 0), 0)
  t.equal(integerOption('limit', 20, 1), 20)
})

t.test('anything else is a RangeError naming the option, its minimum and the value', async (t) => {
  for (const value of [0, -1, 2.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
    t.throws(() => integerOption('limit', value, 1), new RangeError(`limit must be an integer of at least 1, not ${value}`), String(value))
  }
})

t.test('with a maximum, a number above it is a RangeError naming the maximum', async (t) => {
  t.equal(integerOption('addresses', 100, 1, 100), 100)
  t.throws(() => integerOption('addresses', 101, 1, 100), new RangeError('addresses must be an integer of at most 100, not 101'))
})

t.test('its users refuse bad options with it', async (t) => {
  t.throws(() => new Semaphore(0, 0), new RangeError('concurrency must be an integer of at least 1, not 0'))
  t.throws(() => new Semaphore(1, -1), new RangeError('maxWaiting must be an integer of at least 0, not -1'))
  t.throws(() => signatureBudgetLimits({ windowSeconds: 0.5 }), new RangeError('windowSeconds must be an integer of at least 1, not 0.5'))
})
