import t from 'tap'
import { signatureHeadersStage } from '../../../../gateway/src/auth/signature-headers.js'
import type { AuthState } from '../../../../gateway/src/auth/stage.js'
import { captureGatewayError, describedRequest } from '../../../helpers/auth-fixtures.js'

const stage = signatureHeadersStage()
const NAMES = ['x-api-key', 'x-api-timestamp', 'x-api-signature'] as const
type Name = typeof NAMES[number]
const FULL: Record<Name, string> = {
  'x-api-key': 'a'.repeat(64),
  'x-api-timestamp': '1700000000000',
  'x-api-signature': 'c2lnbmF0dXJl'
}

t.test('all three present: the headers are taken as sent', async (t) => {
  const state: AuthState = {}
  await stage.run(describedRequest({ headers: { ...FULL, authorization: 'Bearer x' } }), state)
  t.same(state.signatureHeaders, { apiKey: FULL['x-api-key'], timestamp: FULL['x-api-timestamp'], signature: FULL['x-api-signature'] })
})

// Every non-empty subset of the three headers, each left out or sent empty.
const subsets: Name[][] = []
for (let mask = 1; mask < 8; mask++) subsets.push(NAMES.filter((_, i) => (mask & (1 << i)) !== 0))

for (const how of ['absent', 'empty'] as const) {
  for (const gone of subsets) {
    t.test(`${gone.join(' + ')} ${how} -> MISSING_SIGNATURE_HEADERS listing exactly those`, async (t) => {
      const headers: Record<string, string> = { ...FULL }
      for (const name of gone) {
        if (how === 'absent') delete headers[name]
        else headers[name] = ''
      }
      const state: AuthState = {}
      const err = await captureGatewayError(() => stage.run(describedRequest({ headers }), state))
      t.equal(err.code, 'MISSING_SIGNATURE_HEADERS')
      t.equal(err.statusCode, 401)
      t.same(err.extra?.missing, gone, 'missing names exactly the absent headers, in header order')
      t.same(err.toProblem().missing, gone, 'and the problem body carries it')
      t.equal(state.signatureHeaders, undefined)
    })
  }
}

t.test('a header that is not a single string value counts as missing', async (t) => {
  const err = await captureGatewayError(() => stage.run(describedRequest({ headers: { ...FULL, 'x-api-signature': ['a', 'b'] } }), {}))
  t.equal(err.code, 'MISSING_SIGNATURE_HEADERS')
  t.same(err.extra?.missing, ['x-api-signature'])
})
