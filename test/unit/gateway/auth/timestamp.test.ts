import t from 'tap'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { timestampStage } from '../../../../gateway/src/auth/timestamp.js'
import { captureGatewayError, describedRequest } from '../../../helpers/auth-fixtures.js'

const NOW = 1_700_000_000_000
const MIN = 60_000
const SKEW = 15 * MIN
const stage = timestampStage(() => NOW)

function stateFor (timestamp: string): AuthState {
  return { signatureHeaders: { apiKey: 'a'.repeat(64), timestamp, signature: 'AAAA' } }
}

t.test('timestamps within 15 minutes of server time are accepted', async (t) => {
  const offsets: Array<[string, number]> = [
    ['exactly now', 0],
    ['1 ms before', -1],
    ['1 ms after', 1],
    ['14:59 before', -(14 * MIN + 59_000)],
    ['14:59 after', 14 * MIN + 59_000],
    ['15:00 before, exactly', -SKEW],
    ['15:00 after, exactly', SKEW]
  ]
  for (const [label, offset] of offsets) {
    const state = stateFor(String(NOW + offset))
    await stage.run(describedRequest(), state)
    t.equal(state.timestampMs, NOW + offset, label)
  }
})

t.test('timestamps more than 15 minutes away are TIMESTAMP_OUT_OF_RANGE', async (t) => {
  const offsets: Array<[string, number]> = [
    ['15:00.001 before', -SKEW - 1],
    ['15:00.001 after', SKEW + 1],
    ['15:01 before', -(15 * MIN + 1000)],
    ['15:01 after', 15 * MIN + 1000],
    ['one day before', -24 * 60 * MIN],
    ['one day after', 24 * 60 * MIN]
  ]
  for (const [label, offset] of offsets) {
    t.test(label, async (t) => {
      const state = stateFor(String(NOW + offset))
      const err = await captureGatewayError(() => stage.run(describedRequest(), state))
      t.equal(err.code, 'TIMESTAMP_OUT_OF_RANGE')
      t.equal(err.statusCode, 401)
      t.same(err.extra, { serverTime: NOW, maxSkewMs: SKEW })
      t.match(err.toProblem(), { serverTime: NOW, maxSkewMs: SKEW })
      t.equal(state.timestampMs, undefined)
    })
  }
  const farOff: Array<[string, string]> = [['13-digit year 2001', '1000000000000'], ['15 digits, far future', '999999999999999']]
  for (const [label, value] of farOff) {
    t.test(label, async (t) => {
      t.equal((await captureGatewayError(() => stage.run(describedRequest(), stateFor(value)))).code, 'TIMESTAMP_OUT_OF_RANGE')
    })
  }
})

t.test('timestamps that are not decimal milliseconds are TIMESTAMP_INVALID', async (t) => {
  const nowText = String(NOW)
  const cases: Array<[string, string]> = [
    ['seconds (10 digits)', String(Math.floor(NOW / 1000))],
    ['seconds with 9 digits', '999999999'],
    ['12 digits', nowText.slice(0, 12)],
    ['non-digits', 'yesterday'],
    ['hex', '0x18BCFE56800'],
    ['digits then letters', `${nowText}ms`],
    ['negative', `-${nowText}`],
    ['decimal fraction', `${nowText}.5`],
    ['exponent notation 1.5e12', '1.5e12'],
    ['exponent notation of now', '1.7e12'],
    ['leading +', `+${nowText}`],
    ['leading space', ` ${nowText}`],
    ['trailing space', `${nowText} `],
    ['inner space', `${nowText.slice(0, 6)} ${nowText.slice(6)}`],
    ['trailing newline', `${nowText}\n`],
    ['leading zero', `0${nowText}`],
    ['leading zeros', `000${nowText}`],
    ['16 digits (microseconds)', `${nowText}000`],
    ['19 digits (nanoseconds)', `${nowText}000000`],
    ['single zero', '0'],
    ['all zeros, 13 digits', '0000000000000'],
    ['whitespace only', '   '],
    ['empty', ''],
    ['ISO date', new Date(NOW).toISOString()],
    ['full-width digits', '１７００００００００００００'],
    ['Infinity', 'Infinity'],
    ['NaN', 'NaN']
  ]
  for (const [label, value] of cases) {
    t.test(`${label}: ${JSON.stringify(value)}`, async (t) => {
      const state = stateFor(value)
      const err = await captureGatewayError(() => stage.run(describedRequest(), state))
      t.equal(err.code, 'TIMESTAMP_INVALID')
      t.equal(err.statusCode, 401)
      t.equal(state.timestampMs, undefined)
    })
  }
})

t.test('the clock is read at each request', async (t) => {
  let clock = NOW
  const moving = timestampStage(() => clock)
  const value = String(NOW)
  await moving.run(describedRequest(), stateFor(value))
  clock = NOW + SKEW + 1
  const err = await captureGatewayError(() => moving.run(describedRequest(), stateFor(value)))
  t.equal(err.code, 'TIMESTAMP_OUT_OF_RANGE')
  t.equal(err.extra?.serverTime, NOW + SKEW + 1)
})

t.test('the default clock is Date.now', async (t) => {
  const real = timestampStage()
  const state = stateFor(String(Date.now()))
  await real.run(describedRequest(), state)
  t.type(state.timestampMs, 'number')
  t.equal((await captureGatewayError(() => real.run(describedRequest(), stateFor(String(Date.now() - SKEW - 60_000))))).code, 'TIMESTAMP_OUT_OF_RANGE')
})
