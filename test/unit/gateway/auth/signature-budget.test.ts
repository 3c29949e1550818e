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
  const defaults = { limit: 200, windowSeconds: 10, delayMs: 1000, attackedKeyLimit: 2, attackedKeyAddresses: 3 }
  t.same(signatureBudgetLimits(), { ...defaults, maxAddresses: 100_000, maxKeys: 10_000, maxKeyAddresses: 100_000, maxHeld: 1000 }, 'the defaults')
  t.throws(() => signatureBudgetLimits({ attackedKeyAddresses: 101 }), new RangeError('attackedKeyAddresses must be an integer of at most 100, not 101'))
  t.throws(() => signatureBudgetLimits({ attackedKeyAddresses: 0 }), new RangeError('attackedKeyAddresses must be an integer of at least 1, not 0'))
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

t.test('one address flooding a key past its own budget leaves the key\'s owner elsewhere served; three addresses put the key under attack', async (t) => {
  const recorder = await startRecorder(t)
  const gw = await startStack(t, { store: 'memory', upstreamUrl: recorder.url, config: { signatureFailures: { limit: 40, windowSeconds: 60, delayMs: 0 } } })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  const other = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)
  t.equal((await registerKey(gw.url, token, other)).status, 201)
  const [flooder, owner, second, clean] = ['127.0.0.10', '127.0.0.11', '127.0.0.12', '127.0.0.20'] as const
  const scrape = async (): Promise<string> => (await gw.app.keygate.metrics.scrape()).body
  const get = async (from: string, signer = keys): Promise<RawResponse> =>
    await sendSigned(gw.url, { keys: signer, token, method: 'GET', target: '/v1/clients/', from })

  // the owner makes two honest mistakes, then one address floods 41 bad signatures with the key
  for (let i = 1; i <= 2; i++) t.equal((await badSignature(gw.url, keys, token, owner)).json().code, 'INVALID_SIGNATURE', `the owner's mistake ${i}: checked`)
  const codes = new Map<string, number>()
  for (let i = 1; i <= 41; i++) {
    const { code } = (await badSignature(gw.url, keys, token, flooder)).json() as { code: string }
    codes.set(code, (codes.get(code) ?? 0) + 1)
  }
  t.same(Object.fromEntries(codes), { INVALID_SIGNATURE: 40, RATE_LIMITED: 1 }, 'the flooder: 40 checked, then its own budget refuses it')
  t.equal(metric(await scrape(), 'keygate_signature_budget_keys_attacked_total'), 0, 'two addresses failed on the key: it is not under attack')
  t.equal((await get(owner)).status, 200, 'the owner, at the address of its two mistakes: 200')
  t.equal(recorder.requests.length, 1, 'and forwarded')

  // a second flooding address: three addresses have each failed twice on the key
  for (let i = 1; i <= 2; i++) t.equal((await badSignature(gw.url, keys, token, second)).json().code, 'INVALID_SIGNATURE', `${second}, failure ${i}: checked`)
  t.equal(metric(await scrape(), 'keygate_signature_budget_keys_attacked_total'), 1, 'the key is under attack')
  t.equal(metric(await scrape(), 'keygate_signature_budget_exhausted_total'), 1, 'one address used up its own budget (the flooder)')
  for (const [label, res] of [
    [`${second}, a third bad signature`, await badSignature(gw.url, keys, token, second)],
    [`${second}, a correctly signed GET`, await get(second)],
    // the documented edge: the owner's address made two mistakes on the key, so it is one of the three
    ['the owner, a correctly signed GET', await get(owner)]
  ] as const) {
    t.equal(res.status, 429, `${label}: 429`)
    t.equal(res.json().code, 'RATE_LIMITED')
    t.match(res.json().detail, /for this key, from 3 or more addresses that each failed 2 or more, this one among them/, 'the detail says why')
    t.ok(Number(res.headers['retry-after']) >= 1, 'with Retry-After')
  }
  t.equal(recorder.requests.length, 1, 'nothing refused reached the upstream')

  // an address that failed nothing, and an attacker with a key not under attack, are served
  t.equal((await get(clean)).status, 200, 'a clean address, same key: 200')
  t.equal((await get(second, other)).status, 200, 'an attacker\'s address with a key not under attack: 200')
  t.equal(recorder.requests.length, 3)
  for (let i = 1; i <= 2; i++) {
    t.equal((await badSignature(gw.url, keys, token, clean)).json().code, 'INVALID_SIGNATURE', `the clean address's failure ${i}: checked and explained`)
  }
  t.equal((await badSignature(gw.url, keys, token, clean)).status, 429, 'and then refused')
})

t.test('the key count itself: under attack once 3 addresses each failed 2 checks on it, for its window', async (t) => {
  const budget = createSignatureBudget({ limit: 100, windowSeconds: 10, delayMs: 0 })
  const now = 1_000_000
  for (let i = 0; i < 50; i++) budget.recordFailure('10.0.0.1', now, 'k')
  budget.recordFailure('10.0.0.2', now, 'k')
  budget.recordFailure('10.0.0.2', now, 'k')
  budget.recordFailure('10.0.0.3', now, 'k')
  t.equal(budget.stats.keysAttacked, 0, '50 failures from one address, 2 from another, 1 from a third: not under attack')
  for (const address of ['10.0.0.1', '10.0.0.2', '10.0.0.3']) t.equal(budget.refuseForKey(address, 'k', now), undefined, `${address}: not refused for the key`)
  budget.recordFailure('10.0.0.3', now + 1000, 'k')
  t.equal(budget.stats.keysAttacked, 1, 'the third address\'s second failure: under attack')
  t.ok(budget.refuseForKey('10.0.0.1', 'k', now + 1000) instanceof GatewayError, 'an address with 2 or more failures on the key: refused')
  t.ok(budget.refuseForKey('10.0.0.3', 'k', now + 1000) instanceof GatewayError, 'the third one too')
  budget.recordFailure('10.0.0.4', now + 1000, 'k')
  t.equal(budget.refuseForKey('10.0.0.4', 'k', now + 1000), undefined, 'one with 1: not yet')
  t.equal(budget.refuseForKey('10.0.0.9', 'k', now + 1000), undefined, 'one with none: never')
  t.equal(budget.refuseForKey('10.0.0.1', 'other', now + 1000), undefined, 'another key: not under attack')
  budget.recordFailure('10.0.0.5', now + 1000, 'other')
  budget.recordFailure('10.0.0.5', now + 1000, 'other')
  t.equal(budget.refuseForKey('10.0.0.5', 'k', now + 1000), undefined, 'failures on another key do not count toward this one')
  t.same((budget.refuseForKey('10.0.0.3', 'k', now + 2500) as GatewayError).headers, { 'retry-after': '8' },
    'Retry-After: until the first of the two windows ends (the key\'s, from its first attacker)')
  t.equal(budget.refuseForKey('10.0.0.1', 'k', now + 10_000), undefined, 'the key\'s window has ended')
})

t.test('an address counts once per key window, across its own windows; the counts are bounded', async (t) => {
  const budget = createSignatureBudget({ limit: 100, windowSeconds: 10, delayMs: 0 })
  budget.recordFailure('10.0.0.1', 0, 'k') // its window: 0 to 10 s
  budget.recordFailure('10.0.0.2', 5000, 'k')
  budget.recordFailure('10.0.0.2', 5000, 'k') // the key's window: 5 to 15 s, one attacker
  budget.recordFailure('10.0.0.1', 6000, 'k') // two attackers
  budget.recordFailure('10.0.0.1', 11_000, 'k')
  budget.recordFailure('10.0.0.1', 11_000, 'k') // its second window: still the same attacker
  t.equal(budget.stats.keysAttacked, 0, 'two addresses, however often they fail: not under attack')
  budget.recordFailure('10.0.0.3', 12_000, 'k')
  budget.recordFailure('10.0.0.3', 12_000, 'k')
  t.equal(budget.stats.keysAttacked, 1, 'a third: under attack')

  const one = createSignatureBudget({ limit: 100, windowSeconds: 10, delayMs: 0, attackedKeyAddresses: 1 })
  one.recordFailure('10.0.0.1', 0, 'k')
  one.recordFailure('10.0.0.1', 0, 'k')
  t.ok(one.refuseForKey('10.0.0.1', 'k', 0) instanceof GatewayError, 'attackedKeyAddresses 1: one address failing twice is enough')

  const bounded = createSignatureBudget({ limit: 100, windowSeconds: 10, delayMs: 0, maxKeyAddresses: 100, maxKeys: 10 })
  for (let i = 0; i < 5000; i++) bounded.recordFailure(`10.1.${i >> 8}.${i & 0xff}`, 0, `key-${i % 50}`)
  t.ok(bounded.keyAddresses <= 100, `at most maxKeyAddresses (key, address) pairs are counted (${bounded.keyAddresses})`)
})
