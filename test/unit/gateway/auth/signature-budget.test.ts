// The budget of failed signature checks per client address: past it, that address's signed
// requests get 429 RATE_LIMITED with Retry-After before any check, and reach no upstream, until
// the window ends; the same key and token from another address keep working. Real sockets from
// distinct loopback addresses (Linux routes all of 127/8), a recording upstream, both stores.
import t from 'tap'
import { createSignatureBudget, signatureBudgetLimits } from '../../../../gateway/src/auth/signature-budget.js'
import { GatewayError } from '../../../../gateway/src/errors.js'
import { send, type RawResponse } from '../../../helpers/http.js'
import { rsaKeyPair, signBase64, signedHeaders } from '../../../helpers/keys.js'
import { startRecorder } from '../../../helpers/recorder.js'
import { STORE_KINDS, addUser, login, registerKey, sendSigned, startStack } from '../../../helpers/stack.js'

const A = '127.0.0.2'
const B = '127.0.0.3'

/** a signed GET from `from` whose signature is over other bytes: 401 INVALID_SIGNATURE after an RSA verification */
async function badSignature (url: string, keys: ReturnType<typeof rsaKeyPair>, token: string, from: string): Promise<RawResponse> {
  const headers = signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' })
  const bad = signBase64(keys.privateKey, 'not the signing string')
  return await send(url, '/v1/clients/', { headers: { ...headers, 'x-api-signature': bad }, localAddress: from })
}

function metric (text: string, name: string): number {
  return Number(new RegExp(`^${name} (\\d+)$`, 'm').exec(text)?.[1] ?? NaN)
}

for (const kind of STORE_KINDS) {
  t.test(`${kind} store: an address past its budget gets 429 before any check; the same key from another address is served`, async (t) => {
    const recorder = await startRecorder(t)
    const windowSeconds = 2
    const gw = await startStack(t, { store: kind, upstreamUrl: recorder.url, config: { signatureFailures: { limit: 5, windowSeconds, delayMs: 0 } } })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')
    const keys = rsaKeyPair()
    t.equal((await registerKey(gw.url, token, keys)).status, 201)

    // A floods bad signatures: each is checked and refused, until the budget is spent
    for (let i = 1; i <= 5; i++) {
      const res = await badSignature(gw.url, keys, token, A)
      t.equal(res.json().code, 'INVALID_SIGNATURE', `bad signature ${i} from A: checked and refused`)
    }
    const exhaustedAt = Date.now()
    const refused = [
      ['a bad signature', await badSignature(gw.url, keys, token, A)],
      ['a correctly signed GET', await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/', from: A })],
      ['a correctly signed POST', await sendSigned(gw.url, { keys, token, method: 'POST', target: '/v1/clients/', body: '{"n":1}', from: A })],
      ['no token at all', await send(gw.url, '/v1/clients/', { localAddress: A })]
    ] as const
    for (const [label, res] of refused) {
      t.equal(res.status, 429, `A, ${label}: 429`)
      t.equal(res.json().code, 'RATE_LIMITED', `A, ${label}: RATE_LIMITED`)
      t.match(res.headers['content-type'], /^application\/problem\+json/)
      const retryAfter = Number(res.headers['retry-after'])
      t.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= windowSeconds, `A, ${label}: Retry-After ${retryAfter} within the window`)
    }
    t.equal(recorder.requests.length, 0, 'nothing from A reached the upstream')

    // B: the same key and token, another address
    const fromB = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/', from: B })
    t.equal(fromB.status, 200, 'B, the same key and token: 200')
    t.equal(recorder.requests.length, 1, 'and forwarded')
    t.equal((await badSignature(gw.url, keys, token, B)).json().code, 'INVALID_SIGNATURE', "B's own failures are counted apart")

    const { body } = await gw.app.keygate.metrics.scrape()
    t.equal(metric(body, 'keygate_signature_budget_refusals_total'), 4, 'the refusals are counted')
    t.equal(metric(body, 'keygate_signature_budget_exhausted_total'), 1, 'one address used up its budget')
    t.match(body, /keygate_auth_outcomes_total\{route="\/v1\/clients\/",reason="RATE_LIMITED"\} 4/)

    // once the window has passed, A is served again
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, exhaustedAt + windowSeconds * 1000 + 200 - Date.now())))
    const again = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/', from: A })
    t.equal(again.status, 200, 'after the window A is served again')
    t.equal(recorder.requests.length, 2)
  })
}

t.test('only failed signatures count: stale timestamps, unknown keys and missing tokens cost no budget', async (t) => {
  const gw = await startStack(t, { store: 'memory', config: { signatureFailures: { limit: 2, windowSeconds: 60, delayMs: 0 } } })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  await registerKey(gw.url, token, keys)
  for (let i = 0; i < 5; i++) {
    const stale = signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/', timestamp: Date.now() - 20 * 60_000 })
    t.equal((await send(gw.url, '/v1/clients/', { headers: stale, localAddress: A })).json().code, 'TIMESTAMP_OUT_OF_RANGE')
    const unknown = { ...signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' }), 'x-api-key': 'f'.repeat(64) }
    t.equal((await send(gw.url, '/v1/clients/', { headers: unknown, localAddress: A })).json().code, 'UNKNOWN_API_KEY')
    t.equal((await send(gw.url, '/v1/clients/', { localAddress: A })).json().code, 'MISSING_TOKEN')
  }
  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/', from: A })).status, 200, 'A is still served')
})

t.test('a refusal is held before it is sent (no CPU), at most maxHeld at once', async (t) => {
  const gw = await startStack(t, { store: 'memory', config: { signatureFailures: { limit: 1, windowSeconds: 60, delayMs: 400 } } })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  await registerKey(gw.url, token, keys)
  t.equal((await badSignature(gw.url, keys, token, A)).json().code, 'INVALID_SIGNATURE')
  const started = performance.now()
  const held = await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/', from: A })
  const waited = performance.now() - started
  t.equal(held.status, 429)
  // a lower bound only: the answer cannot come before the hold ends
  t.ok(waited >= 390, `the 429 came after the hold (${waited.toFixed(0)} ms)`)
  t.equal((await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/', from: B })).status, 200, 'B is not held')
})

t.test('the budget itself: per address, IPv6 per /64, bounded, held answers bounded', async (t) => {
  const budget = createSignatureBudget({ limit: 3, windowSeconds: 10, delayMs: 0, maxAddresses: 100 })
  t.same(signatureBudgetLimits(), { limit: 200, windowSeconds: 10, delayMs: 1000, maxAddresses: 100_000, maxHeld: 1000 }, 'the defaults')
  const now = 1_000_000
  t.equal(budget.refuse('10.0.0.1', now), undefined, 'nothing counted: nothing refused')
  for (let i = 0; i < 3; i++) budget.recordFailure('10.0.0.1', now)
  t.ok(budget.refuse('10.0.0.1', now) instanceof GatewayError, 'the limit reached: refused')
  t.ok(budget.refuse('::ffff:10.0.0.1', now) instanceof GatewayError, 'its IPv4-mapped form is the same address')
  t.equal(budget.refuse('10.0.0.2', now), undefined, 'another address is not')
  const error = budget.refuse('10.0.0.1', now + 2500) as GatewayError
  t.equal(error.code, 'RATE_LIMITED')
  t.equal(error.statusCode, 429)
  t.same(error.headers, { 'retry-after': '8' }, 'Retry-After: the seconds left in the window, rounded up')
  t.equal(budget.refuse('10.0.0.1', now + 10_000), undefined, 'the window has ended')
  t.equal(budget.stats.exhausted, 1)
  t.equal(budget.stats.refusals, 3)

  for (const address of ['2001:db8:1:2::1', '2001:db8:1:2::99', '2001:db8:1:2:ffff::5']) budget.recordFailure(address, now)
  t.ok(budget.refuse('2001:db8:1:2::abcd', now) instanceof GatewayError, 'IPv6 addresses of one /64 share a budget')
  t.equal(budget.refuse('2001:db8:1:3::1', now), undefined, 'another /64 does not')

  // a flood from ever-new addresses: the count stays bounded
  for (let i = 0; i < 5000; i++) budget.recordFailure(`2001:db8:${(i >> 16) & 0xffff}:${i & 0xffff}::1`, now)
  t.ok(budget.addresses <= 100, `at most maxAddresses addresses are counted (${budget.addresses})`)

  const retry = createSignatureBudget({ limit: 1, windowSeconds: 2, delayMs: 1000 })
  retry.recordFailure('10.0.0.8', now)
  const afterHold = await (retry.refuse('10.0.0.8', now + 500) as Promise<never>).catch((err: unknown) => err as GatewayError)
  t.same(afterHold.headers, { 'retry-after': '1' }, 'held 1 s of the 1.5 s left: Retry-After counts from when the answer leaves')

  const holding = createSignatureBudget({ limit: 1, windowSeconds: 10, delayMs: 50, maxHeld: 2 })
  holding.recordFailure('10.0.0.9', Date.now())
  const answers = [0, 1, 2, 3].map(() => holding.refuse('10.0.0.9', Date.now()))
  t.equal(answers.filter((a) => a instanceof Promise).length, 2, 'two are held')
  t.equal(holding.held, 2)
  t.equal(answers.filter((a) => a instanceof GatewayError).length, 2, 'the others are answered at once')
  const settled = await Promise.allSettled(answers.filter((a) => a instanceof Promise))
  t.ok(settled.every((s) => s.status === 'rejected' && (s.reason as GatewayError).code === 'RATE_LIMITED'), 'held ones end in RATE_LIMITED')
  t.equal(holding.held, 0, 'and are released')
  // 10 ms left in the window: held 10 ms, not 5 s (a loose bound: the machine is shared)
  const late = createSignatureBudget({ limit: 1, windowSeconds: 1, delayMs: 5000 })
  late.recordFailure('10.0.0.9', 0)
  const started = Date.now()
  await t.rejects(late.refuse('10.0.0.9', 990) as Promise<never>, { code: 'RATE_LIMITED' })
  t.ok(Date.now() - started < 2500, 'never held past the window')
})
