// The remote key set's rules, each against an injected fetch that counts its calls, an injected
// clock and an injected timer (no network, no sleeps): one fetch shared by concurrent callers, the
// refresh schedule, failures and outages, unknown kids, which keys are used, and the fetch's
// bounds. The last test runs the default fetch and timer against a real server on 127.0.0.1.
import { createHash, generateKeyPairSync, type KeyObject } from 'node:crypto'
import { createServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { exportJWK, type JWK } from 'jose'
import t from 'tap'
import { isGatewayError } from '../../../../gateway/src/errors.js'
import {
  createRemoteKeySet, type RemoteKeySet, type RemoteKeySetFetchOutcome, type RemoteKeySetOptions
} from '../../../../gateway/src/remote-keys/remote-key-set.js'

const URL_OF_SET = 'https://idp.example/jwks'

type KeyKind = 'rsa' | 'rsa1024' | 'ec' | 'p384' | 'ed25519'
const KEY_PAIR_OF: Record<KeyKind, () => { publicKey: KeyObject }> = {
  rsa: () => generateKeyPairSync('rsa', { modulusLength: 2048 }),
  rsa1024: () => generateKeyPairSync('rsa', { modulusLength: 1024 }),
  ec: () => generateKeyPairSync('ec', { namedCurve: 'P-256' }),
  p384: () => generateKeyPairSync('ec', { namedCurve: 'P-384' }),
  ed25519: () => generateKeyPairSync('ed25519')
}
const publicJwk = async (kind: KeyKind, extra: JWK = {}): Promise<JWK> => ({ ...await exportJWK(KEY_PAIR_OF[kind]().publicKey), ...extra })
const privateJwk = async (extra: JWK): Promise<JWK> => ({ ...await exportJWK(generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey), ...extra })

// one RSA key made once: RSA generation is the slow part
const RSA_A = await publicJwk('rsa', { kid: 'rsa-a' })

interface ScheduledTask { task: () => void; delayMs: number; cancelled: boolean; fired: boolean }

/** A provider behind an injected fetch, a clock and a timer, all under the test's hand. */
function provider (keys: JWK[], options: Partial<RemoteKeySetOptions> = {}) {
  const idp = {
    keys,
    calls: 0,
    cacheControl: undefined as string | undefined,
    /** replaces the answer: a Response, or an error to throw */
    answer: undefined as (() => Response) | undefined,
    /** while set, fetches wait for it */
    gate: undefined as Promise<void> | undefined,
    init: undefined as RequestInit | undefined,
    clock: 1_000_000,
    timers: [] as ScheduledTask[],
    outcomes: [] as RemoteKeySetFetchOutcome[],
    /** resolved by the next fetch's outcome */
    waiters: [] as Array<() => void>
  }
  const fetch: typeof globalThis.fetch = async (_input, init) => {
    idp.calls++
    idp.init = init
    if (idp.gate !== undefined) await idp.gate
    if (idp.answer !== undefined) return idp.answer()
    return Response.json({ keys: idp.keys }, { headers: idp.cacheControl === undefined ? {} : { 'cache-control': idp.cacheControl } })
  }
  const set = createRemoteKeySet({
    url: URL_OF_SET,
    name: 'test-idp',
    algorithms: ['RS256', 'PS256', 'ES256', 'EdDSA'],
    fetch,
    now: () => idp.clock,
    schedule: (task, delayMs) => {
      const scheduled = { task, delayMs, cancelled: false, fired: false }
      idp.timers.push(scheduled)
      return () => { scheduled.cancelled = true }
    },
    onFetch: (outcome) => {
      idp.outcomes.push(outcome)
      for (const resolve of idp.waiters.splice(0)) resolve()
    },
    ...options
  })
  /** the live timers: one at most */
  const live = (): ScheduledTask[] => idp.timers.filter((timer) => !timer.cancelled && !timer.fired)
  const pending = (): ScheduledTask | undefined => live().at(-1)
  /** moves the clock to the pending timer, runs its task and waits for the fetch it makes */
  const fire = async (): Promise<void> => {
    const timer = pending()
    if (timer === undefined) throw new Error('no timer pending')
    idp.clock += timer.delayMs
    timer.fired = true
    const fetched = new Promise<void>((resolve) => idp.waiters.push(resolve))
    timer.task()
    await fetched
  }
  return { set, idp, pending, live, fire }
}

/** The code a rejected keyFor() carries, or 'resolved'. */
async function codeOf (promise: Promise<unknown>): Promise<string> {
  try {
    await promise
    return 'resolved'
  } catch (err) {
    return isGatewayError(err) ? err.code : `not a GatewayError: ${String(err)}`
  }
}

t.test('start() fetches once, and keyFor()s during that fetch share it', async (t) => {
  const { set, idp } = provider([RSA_A])
  let release = (): void => {}
  idp.gate = new Promise((resolve) => { release = resolve })
  const started = set.start()
  const keys = Array.from({ length: 5 }, () => set.keyFor('rsa-a', 'RS256'))
  t.equal(set.keyForSync('rsa-a', 'RS256'), undefined, 'nothing cached before the first fetch')
  release()
  await started
  const resolved = await Promise.all(keys)
  t.equal(idp.calls, 1, 'one fetch')
  t.ok(resolved.every((key) => key === resolved[0]), 'the same imported key for each')
  t.equal(set.keyForSync('rsa-a', 'RS256'), resolved[0], 'cached: keyForSync answers without a promise')
  t.equal(await set.keyFor('rsa-a', 'RS256'), resolved[0])
  t.equal(idp.calls, 1, 'a known kid fetches nothing')
  t.equal(idp.init?.redirect, 'manual', 'redirects are not followed')
  t.ok(idp.init?.signal instanceof AbortSignal, 'the fetch has a deadline')
  t.match(set.state(), { usable: true, keys: 1, failures: 0, lastError: undefined, ageSeconds: 0 })
  t.match(idp.outcomes, [{ ok: true, keys: 1, ignored: [] }])
})

t.test('without start(), the first keyFor() fetches', async (t) => {
  const { set, idp } = provider([RSA_A])
  const [a, b] = await Promise.all([set.keyFor('rsa-a', 'RS256'), set.keyFor('rsa-a', 'RS256')])
  t.equal(a, b)
  t.equal(idp.calls, 1)
})

t.test('the background refresh: Cache-Control max-age within the bounds, no later than half of maxStaleMs', async (t) => {
  const cases: Array<[cacheControl: string | undefined, expectedMs: number, options?: Partial<RemoteKeySetOptions>]> = [
    [undefined, 300_000],
    ['max-age=600', 600_000],
    ['public, max-age="120"', 120_000],
    ['max-age=10', 60_000],
    ['no-store', 60_000],
    ['no-cache, max-age=600', 60_000],
    ['max-age=abc', 300_000],
    ['max-age=999999999', 86_400_000, { maxStaleMs: 7 * 86_400_000 }],
    ['max-age=86400', 43_200_000],
    [undefined, 20_000, { defaultRefreshMs: 20_000, minRefreshMs: 1000 }]
  ]
  for (const [cacheControl, expectedMs, options] of cases) {
    const { set, idp, pending } = provider([RSA_A], options)
    idp.cacheControl = cacheControl
    await set.start()
    t.equal(pending()?.delayMs, expectedMs, `Cache-Control: ${cacheControl ?? '(none)'} ${JSON.stringify(options ?? {})}`)
    t.equal(set.state().nextFetchAt, idp.clock + expectedMs)
  }
})

t.test('the refresh timer fetches the set again: a rotated key is found, a removed one is gone', async (t) => {
  const { set, idp, live, fire } = provider([RSA_A])
  await set.start()
  idp.keys = [await publicJwk('ec', { kid: 'ec-b' })]
  await fire()
  t.equal(idp.calls, 2, 'one refresh')
  t.ok(set.keyForSync('ec-b', 'ES256'), 'the new key')
  t.equal(set.keyForSync('rsa-a', 'RS256'), undefined, 'the removed key')
  t.equal(live().length, 1, 'one timer at a time')
})

t.test('a failing refresh keeps the keys, retries 5, 10, 20, 40, 60, 60 s; past maxStaleMs nothing verifies; a success recovers', async (t) => {
  const { set, idp, pending, fire } = provider([RSA_A], { maxStaleMs: 3_600_000 })
  await set.start()
  const lastSuccess = idp.clock
  idp.answer = () => new Response('busy', { status: 503 })
  const delays: number[] = []
  for (let i = 0; i < 6; i++) {
    await fire()
    delays.push(pending()?.delayMs ?? -1)
  }
  t.same(delays, [5_000, 10_000, 20_000, 40_000, 60_000, 60_000])
  t.match(set.state(), { usable: true, failures: 6, lastError: /test-idp: the key set at https:\/\/idp\.example\/jwks answered 503/ })
  t.ok(await set.keyFor('rsa-a', 'RS256'), 'the kept keys verify')
  t.match(idp.outcomes.at(-1), { ok: false, error: /answered 503/ })

  idp.clock = lastSuccess + 3_600_000
  t.ok(set.keyForSync('rsa-a', 'RS256'), 'at maxStaleMs exactly: still usable')
  idp.clock = lastSuccess + 3_600_001
  t.equal(set.keyForSync('rsa-a', 'RS256'), undefined)
  const calls = idp.calls
  const err = await set.keyFor('rsa-a', 'RS256').then(() => undefined, (e: unknown) => e)
  t.ok(isGatewayError(err) && err.code === 'IDP_KEYS_UNAVAILABLE' && err.statusCode === 503, 'a known kid: 503 IDP_KEYS_UNAVAILABLE')
  t.ok(isGatewayError(err) && Number(err.headers?.['retry-after']) >= 1, 'with Retry-After')
  t.equal(idp.calls, calls, 'a request does not fetch: the retries do')
  t.equal(await codeOf(set.keyFor('other', 'RS256')), 'IDP_KEYS_UNAVAILABLE', 'an unknown kid too')
  t.match(set.state(), { usable: false })

  idp.answer = undefined
  await fire()
  t.ok(await set.keyFor('rsa-a', 'RS256'), 'a later success recovers, no restart')
  t.match(set.state(), { usable: true, failures: 0, lastError: undefined })
})

t.test('a first fetch that fails: start() rejects with why; keyFor() is 503 until a retry succeeds', async (t) => {
  const { set, idp, pending, fire } = provider([RSA_A])
  idp.answer = () => new Response('no', { status: 500 })
  await t.rejects(set.start(), /test-idp: the key set at https:\/\/idp\.example\/jwks answered 500/)
  t.equal(await codeOf(set.keyFor('rsa-a', 'RS256')), 'IDP_KEYS_UNAVAILABLE')
  t.equal(pending()?.delayMs, 5_000, 'retried in 5 s')
  idp.answer = undefined
  let release = (): void => {}
  idp.gate = new Promise((resolve) => { release = resolve })
  const retried = fire()
  const waiting = set.keyFor('rsa-a', 'RS256')
  release()
  await retried
  t.ok(await waiting, 'a caller waits for the retry under way')
  t.equal(idp.calls, 2)
})

t.test('unknown kids: one refetch, then at most one per unknownKidIntervalMs, whatever the kids', async (t) => {
  const { set, idp } = provider([RSA_A])
  await set.start()
  const made = Array.from({ length: 1000 }, (_, i) => set.keyFor(`made-up-${i}`, 'RS256'))
  const codes = await Promise.all(made.map(codeOf))
  t.equal(idp.calls, 2, '1,000 made-up kids at once: one fetch')
  t.same([...new Set(codes)], ['UNKNOWN_SIGNING_KEY'])
  const later = new Set<string>()
  for (let i = 0; i < 1000; i++) {
    idp.clock += 29
    later.add(await codeOf(set.keyFor(`later-${i}`, 'RS256')))
  }
  t.same([...later], ['UNKNOWN_SIGNING_KEY'])
  t.equal(idp.calls, 2, 'and none more within the interval (29 s of them)')
  idp.clock += 1000
  t.equal(await codeOf(set.keyFor('after', 'RS256')), 'UNKNOWN_SIGNING_KEY')
  t.equal(idp.calls, 3, 'one more once the interval passed')
  const err = await set.keyFor('after-2', 'RS256').then(() => undefined, (e: unknown) => e)
  t.ok(isGatewayError(err) && err.statusCode === 401 && /test-idp's key set holds no key "after-2" for RS256/.test(err.message), 'the detail names kid, alg and issuer')
  t.ok(isGatewayError(err) && /invalid_token/.test(err.headers?.['www-authenticate'] ?? ''), 'with the Bearer challenge')
})

t.test('a key rotated in after the last fetch is found by the refetch its kid causes', async (t) => {
  const { set, idp } = provider([RSA_A])
  await set.start()
  idp.keys = [RSA_A, await publicJwk('ed25519', { kid: 'ed-new' })]
  const [first, second] = await Promise.all([set.keyFor('ed-new', 'EdDSA'), set.keyFor('ed-new', 'EdDSA')])
  t.ok(first)
  t.equal(first, second)
  t.equal(idp.calls, 2)
  t.equal(idp.outcomes.length, 2)
})

t.test('an alg the set does not serve: refused without a fetch', async (t) => {
  const { set, idp } = provider([RSA_A])
  await set.start()
  for (const alg of ['HS256', 'none', 'RS384', 'ES512']) t.equal(await codeOf(set.keyFor('rsa-a', alg)), 'UNKNOWN_SIGNING_KEY', alg)
  t.equal(idp.calls, 1)
})

t.test('which JWKs are used, and for which alg', async (t) => {
  const rsa1024 = await publicJwk('rsa1024')
  const cases: Array<[name: string, jwk: JWK, alg: string, used: boolean, reason?: RegExp]> = [
    ['RSA without alg: RS256', { ...RSA_A, kid: 'k' }, 'RS256', true],
    ['RSA without alg: PS256 too', { ...RSA_A, kid: 'k' }, 'PS256', true],
    ['RSA with alg RS256: not for PS256', { ...RSA_A, kid: 'k', alg: 'RS256' }, 'PS256', false],
    ['use sig', { ...RSA_A, kid: 'k', use: 'sig' }, 'RS256', true],
    ['use enc', { ...RSA_A, kid: 'k', use: 'enc' }, 'RS256', false, /use "enc" is not "sig"/],
    ['key_ops without verify', { ...RSA_A, kid: 'k', key_ops: ['encrypt'] }, 'RS256', false, /key_ops/],
    ['key_ops with verify', { ...RSA_A, kid: 'k', key_ops: ['verify'] }, 'RS256', true],
    ['alg not allowed', { ...RSA_A, kid: 'k', alg: 'RS512' }, 'RS256', false, /alg "RS512" is not allowed/],
    ['alg that does not fit the kty', { ...await publicJwk('ec'), kid: 'k', alg: 'RS256' }, 'RS256', false, /does not fit its kty EC/],
    ['EC P-256', await publicJwk('ec', { kid: 'k' }), 'ES256', true],
    ['EC P-384, ES384 not allowed', await publicJwk('p384', { kid: 'k' }), 'ES256', false, /no allowed algorithm/],
    ['Ed25519', await publicJwk('ed25519', { kid: 'k' }), 'EdDSA', true],
    ['a private EC key', await privateJwk({ kid: 'k' }), 'ES256', false, /private key material \("d"\)/],
    ['a public key with a stray "p"', { ...RSA_A, kid: 'k', p: 'AQAB' }, 'RS256', false, /private key material/],
    ['RSA of 1024 bits', { ...rsa1024, kid: 'k' }, 'RS256', false, /under 2048 bits/],
    ['kty oct', { kty: 'oct', k: 'c2VjcmV0', kid: 'k' }, 'RS256', false, /kty "oct"/],
    ['an empty kid', { ...RSA_A, kid: '' }, 'RS256', false, /kid is not a non-empty string/],
    ['an EC point not on the curve', { ...await publicJwk('ec'), kid: 'k', x: 'AAAA' }, 'ES256', false, /does not import/]
  ]
  for (const [name, jwk, alg, used, reason] of cases) {
    // beside a good key: a set of only refused keys is refused whole (next test)
    const { set, idp } = provider([{ ...RSA_A, kid: 'good' }, jwk])
    await set.start()
    t.equal(set.keyForSync('k', alg) !== undefined, used, name)
    if (reason !== undefined) t.match(idp.outcomes[0]?.ignored?.join('\n'), reason, `${name}: the reason`)
  }
})

t.test('a set with no usable key is a failed fetch: the keys from before stay', async (t) => {
  const { set, idp } = provider([RSA_A])
  await set.start()
  idp.keys = [await privateJwk({ kid: 'leaked' })]
  idp.clock += 60_000
  // the fetch for the unknown kid failed: the set could not be checked for it (issue 40: 503, not the client's fault)
  t.equal(await codeOf(set.keyFor('leaked', 'ES256')), 'IDP_KEYS_UNAVAILABLE')
  t.ok(set.keyForSync('rsa-a', 'RS256'), 'the earlier set serves')
  t.match(set.state().lastError, /holds no key usable for RS256, PS256, ES256, EdDSA: kid "leaked": carries private key material/)
})

t.test('duplicate kids: neither key is used for an alg both serve; the rest of the set is', async (t) => {
  const ecOne = await publicJwk('ec', { kid: 'dup' })
  const ecTwo = await publicJwk('ec', { kid: 'dup' })
  const ed = await publicJwk('ed25519', { kid: 'shared' })
  const ecShared = await publicJwk('ec', { kid: 'shared' })
  const { set, idp } = provider([RSA_A, ecOne, ecTwo, ed, ecShared])
  await set.start()
  t.equal(await codeOf(set.keyFor('dup', 'ES256')), 'UNKNOWN_SIGNING_KEY', 'two keys for one kid and alg: ambiguous')
  t.ok(set.keyForSync('rsa-a', 'RS256'), 'the others serve')
  t.ok(set.keyForSync('shared', 'EdDSA'), 'one kid, two key types: each for its own alg')
  t.ok(set.keyForSync('shared', 'ES256'))
  t.match(idp.outcomes[0]?.ignored, [/kid "dup": names more than one key for ES256/])
  t.equal(set.state().keys, 5)
})

t.test('a token without kid takes the one key that fits its alg, and only then; a key without kid serves only such tokens', async (t) => {
  const { kid: _kid, ...noKid } = await publicJwk('ed25519')
  const { set } = provider([RSA_A, noKid, await publicJwk('ec', { kid: 'ec-1' }), await publicJwk('ec', { kid: 'ec-2' })])
  await set.start()
  t.ok(await set.keyFor(undefined, 'EdDSA'), 'one EdDSA key, no kid')
  t.ok(await set.keyFor(undefined, 'RS256'), 'one RS256 key (with a kid)')
  const err = await set.keyFor(undefined, 'ES256').then(() => undefined, (e: unknown) => e)
  t.ok(isGatewayError(err) && err.code === 'UNKNOWN_SIGNING_KEY' && /names no kid, and 2 of test-idp's keys fit ES256/.test(err.message), 'two fit ES256')
  t.equal(await codeOf(set.keyFor('anything', 'EdDSA')), 'UNKNOWN_SIGNING_KEY', 'a kid never picks the key without one')
})

t.test('fetch bounds: each failure says what was wrong with which URL', async (t) => {
  const streamOf = (size: number): ReadableStream<Uint8Array> => {
    let sent = 0
    return new ReadableStream({
      pull (controller) {
        if (sent >= size) return controller.close()
        controller.enqueue(new Uint8Array(16 * 1024).fill(32))
        sent += 16 * 1024
      }
    })
  }
  // ends only when cancelled: reading it ends at maxBytes
  const endless = new ReadableStream<Uint8Array>({
    pull (controller) {
      controller.enqueue(new Uint8Array(64 * 1024).fill(32))
    }
  })
  const tooMany = Array.from({ length: 3 }, () => RSA_A)
  const cases: Array<[name: string, answer: () => Response, message: RegExp, options?: Partial<RemoteKeySetOptions>]> = [
    ['404', () => new Response('', { status: 404 }), /answered 404$/],
    ['a redirect', () => new Response(null, { status: 302, headers: { location: 'https://elsewhere.example/jwks' } }),
      /answered 302, a redirect to https:\/\/elsewhere\.example\/jwks: redirects are not followed/],
    ['Content-Length over maxBytes', () => new Response('{}', { headers: { 'content-length': '600000' } }), /is 600000 bytes \(Content-Length\), over the 524288 allowed/],
    ['a body over maxBytes, no Content-Length', () => new Response(streamOf(600 * 1024)), /is over the 524288 bytes allowed/],
    ['an endless body', () => new Response(endless), /is over the 1000 bytes allowed/, { maxBytes: 1000 }],
    ['not JSON', () => new Response('<html>'), /is not JSON/],
    ['not UTF-8', () => new Response(new Uint8Array([0x7b, 0xff, 0x7d])), /is not JSON/],
    ['no keys array', () => Response.json({ key: [] }), /is not a JWK Set: it has no "keys" array/],
    ['keys not an array', () => Response.json({ keys: {} }), /has no "keys" array/],
    ['an array', () => Response.json([RSA_A]), /has no "keys" array/],
    ['over maxKeys', () => Response.json({ keys: tooMany }), /holds 3 keys, over the 2 allowed/, { maxKeys: 2 }],
    ['a network error', () => { throw new TypeError('fetch failed', { cause: new Error('connect ECONNREFUSED 10.0.0.1:443') }) },
      /could not be fetched: fetch failed \(connect ECONNREFUSED 10\.0\.0\.1:443\)/]
  ]
  for (const [name, answer, message, options] of cases) {
    const { set, idp } = provider([RSA_A], options)
    idp.answer = answer
    const err = await set.start().then(() => undefined, (e: unknown) => e as Error)
    t.match(err?.message, /^test-idp: the key set at https:\/\/idp\.example\/jwks /, `${name}: names the set and its URL`)
    t.match(err?.message, message, name)
    t.match(set.state(), { usable: false, failures: 1 }, `${name}: a failure`)
    t.match(idp.outcomes, [{ ok: false, error: message }], `${name}: reported`)
  }
})

t.test('the URL: https, or http on a loopback host; options checked up front', async (t) => {
  const base = { name: 'n', algorithms: ['RS256'], fetch: async () => Response.json({ keys: [] }) }
  const accepted = ['https://idp.example/jwks', 'http://127.0.0.1:8080/jwks', 'http://127.9.9.9/jwks', 'http://localhost/jwks', 'http://[::1]:99/jwks']
  for (const url of accepted) t.doesNotThrow(() => createRemoteKeySet({ ...base, url }).close(), url)
  const refused: Array<[string, RegExp]> = [
    ['http://idp.example/jwks', /must be https:/],
    ['http://127.0.0.1.nip.io/jwks', /must be https:/],
    ['http://10.0.0.1/jwks', /must be https:/],
    ['ftp://idp.example/jwks', /must be https:/],
    ['https://user:pass@idp.example/jwks', /must not carry credentials/],
    ['not a url', /is not a URL/]
  ]
  for (const [url, message] of refused) t.throws(() => createRemoteKeySet({ ...base, url }), message, url)
  t.throws(() => createRemoteKeySet({ ...base, url: accepted[0] ?? '', algorithms: [] }), /algorithms is empty/)
  t.throws(() => createRemoteKeySet({ ...base, url: accepted[0] ?? '', algorithms: ['HS256', 'none'] }), /HS256, none not supported/)
  t.throws(() => createRemoteKeySet({ ...base, url: accepted[0] ?? '', timeoutMs: 0 }), /timeoutMs must be a positive integer/)
  t.throws(() => createRemoteKeySet({ ...base, url: accepted[0] ?? '', minRefreshMs: 10, maxRefreshMs: 5 }), /minRefreshMs \(10\) is over maxRefreshMs/)
})

t.test('close() stops the refresh timer', async (t) => {
  const { set, idp, pending } = provider([RSA_A])
  await set.start()
  const timer = pending()
  set.close()
  t.ok(timer?.cancelled, 'the timer is cancelled')
  t.equal(set.state().nextFetchAt, undefined)
  t.ok(set.keyForSync('rsa-a', 'RS256'), 'the cached keys still answer')
  t.equal(await codeOf(set.keyFor('unknown', 'RS256')), 'UNKNOWN_SIGNING_KEY')
  t.equal(idp.calls, 1, 'and nothing is fetched')
})

t.test('a real server on 127.0.0.1: the default fetch and timer, no redirects, the size bound, the timeout', async (t) => {
  const hanging = new Set<ServerResponse>()
  const server = createServer((req, res) => {
    if (req.url === '/jwks') {
      res.writeHead(200, { 'content-type': 'application/jwk-set+json', 'cache-control': 'max-age=120' })
      res.end(JSON.stringify({ keys: [RSA_A] }))
    } else if (req.url === '/moved') {
      res.writeHead(301, { location: '/jwks' })
      res.end()
    } else if (req.url === '/big') {
      res.writeHead(200, { 'content-type': 'application/json' }) // chunked: no Content-Length
      const chunk = Buffer.alloc(64 * 1024, 32)
      const write = (): void => { while (res.write(chunk)) { /* until the socket pushes back */ } }
      res.on('drain', write)
      write()
      res.on('close', () => res.off('drain', write))
    } else {
      hanging.add(res) // /slow: headers never come
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const res of hanging) res.destroy()
    server.closeAllConnections()
    server.close()
  })
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const sets: RemoteKeySet[] = []
  t.teardown(() => { for (const set of sets) set.close() })
  const make = (path: string, options: Partial<RemoteKeySetOptions> = {}): RemoteKeySet => {
    const set = createRemoteKeySet({ url: base + path, name: 'local', algorithms: ['RS256'], ...options })
    sets.push(set)
    return set
  }

  const refTimers = (): number => process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length
  const before = refTimers()
  const good = make('/jwks')
  await good.start()
  t.ok(await good.keyFor('rsa-a', 'RS256'), 'fetched over a socket by globalThis.fetch')
  t.ok((good.state().nextFetchAt ?? 0) - Date.now() > 100_000, 'refresh in max-age=120 s')
  t.equal(refTimers(), before, 'its refresh timer is unref\'d: it never holds the process')

  await t.rejects(make('/moved').start(), new RegExp(`local: the key set at ${base}/moved answered 301, a redirect to /jwks: redirects are not followed`))
  await t.rejects(make('/big').start(), /local: the key set at .*\/big is over the 524288 bytes allowed/)
  const startedAt = Date.now()
  await t.rejects(make('/slow', { timeoutMs: 300 }).start(), /local: the key set at .*\/slow did not answer within 300 ms/)
  t.ok(Date.now() - startedAt < 5000, 'given up at the timeout')
})

t.test('published keys by RFC 7638 thumbprint (an agent\'s directory): nbf and exp honoured, an unknown one fetched at most once per interval', async (t) => {
  const pair = generateKeyPairSync('ed25519')
  const jwk = { ...await exportJWK(pair.publicKey) }
  const future = { ...await publicJwk('ed25519'), nbf: 1_000_000 / 1000 + 3600 }
  const expired = { ...await publicJwk('ed25519'), exp: 1_000_000 / 1000 - 1 }
  const { set, idp } = provider([jwk, future, expired], { keyIds: 'thumbprint', algorithms: ['EdDSA'], unknownKidIntervalMs: 10_000 })
  await set.start()
  // RFC 7638's thumbprint of an Ed25519 key: SHA-256 of {"crv","kty","x"}, base64url
  const thumbprint = createHash('sha256').update(JSON.stringify({ crv: 'Ed25519', kty: 'OKP', x: jwk.x })).digest('base64url')
  const found = await set.publishedKey(thumbprint)
  t.equal(found.thumbprint, thumbprint)
  t.ok(found.keyObject.equals(pair.publicKey), 'the key itself, as a KeyObject')
  t.equal(set.publishedKey(thumbprint), found, 'from the cache: no promise')
  const idOf = (key: JWK): string => createHash('sha256').update(JSON.stringify({ crv: key.crv, kty: key.kty, x: key.x })).digest('base64url')
  const calls = idp.calls
  await t.rejects(async () => { await set.publishedKey(idOf(future)) }, { code: 'UNKNOWN_SIGNING_KEY' }, 'not valid before its nbf')
  t.equal(idp.calls, calls + 1, 'an id not usable now: one fetch')
  await t.rejects(async () => { await set.publishedKey(idOf(expired)) }, { code: 'UNKNOWN_SIGNING_KEY' }, 'not valid past its exp')
  await t.rejects(async () => { await set.publishedKey('made-up') }, { code: 'UNKNOWN_SIGNING_KEY', message: /no usable key "made-up" \(by its JWK thumbprint\)/ })
  t.equal(idp.calls, calls + 1, 'more unknown ids in the interval: no more fetches')
  idp.clock += 3600 * 1000
  idp.keys = [jwk, future]
  t.equal((await set.publishedKey(idOf(future))).id, idOf(future), 'valid once its nbf is reached')
})

t.test('checkDocument: a fetched set it refuses is not believed, and the keys held stay', async (t) => {
  let refuse = false
  const { set, idp } = provider([RSA_A], {
    checkDocument: ({ headers, keys }) => {
      if (refuse) throw new Error(`unsigned (${keys.length} keys, content-type ${headers.get('content-type') ?? 'none'})`)
    }
  })
  await set.start()
  t.equal((await set.publishedKey('rsa-a')).id, 'rsa-a', 'by kid, by default')
  refuse = true
  idp.keys = [RSA_A, await publicJwk('ec', { kid: 'ec-new' })]
  // the refetch it caused was refused: unavailable (the set could not be checked), not unknown
  await t.rejects(async () => { await set.publishedKey('ec-new') }, { code: 'IDP_KEYS_UNAVAILABLE' })
  t.match(set.state(), { usable: true, failures: 1, lastError: /the key set at https:\/\/idp\.example\/jwks is refused: unsigned \(2 keys, content-type application\/json\)/ })
  t.equal((await set.publishedKey('rsa-a')).id, 'rsa-a', 'the keys held before still serve')
})

/** A fetch under way that waits for the test: `release` lets it answer (with `idp.answer` then). */
function hold (idp: { gate: Promise<void> | undefined }): () => void {
  let release = (): void => {}
  idp.gate = new Promise((resolve) => { release = resolve })
  return () => {
    idp.gate = undefined
    release()
  }
}

t.test('issue 40: ten unknown kids during a stuck refresh share it, one outcome each, and none starts another fetch', async (t) => {
  for (const [outcome, expected] of [['fails', 'IDP_KEYS_UNAVAILABLE'], ['succeeds without the kids', 'UNKNOWN_SIGNING_KEY']] as const) {
    const { set, idp, pending } = provider([RSA_A])
    await set.start()
    const release = hold(idp)
    // the background refresh starts, and hangs
    idp.clock += pending()?.delayMs ?? 0
    pending()?.task()
    const codes = Promise.all(Array.from({ length: 10 }, (_, i) => codeOf(set.keyFor(`new-${i}`, 'RS256'))))
    if (outcome === 'fails') idp.answer = () => new Response('down', { status: 503 })
    release()
    t.same([...new Set(await codes)], [expected], `the refresh ${outcome}: all ten ${expected}`)
    t.equal(idp.calls, 2, `the refresh ${outcome}: the first fetch and the refresh, no third after it`)
  }
})

t.test('issue 40: ten unknown kids at once start one fetch and share its outcome', async (t) => {
  const { set, idp } = provider([RSA_A])
  await set.start()
  const release = hold(idp)
  const codes = Promise.all(Array.from({ length: 10 }, (_, i) => codeOf(set.keyFor(`new-${i}`, 'RS256'))))
  idp.answer = () => { throw new TypeError('fetch failed', { cause: new Error('The operation was aborted due to timeout') }) }
  release()
  t.same([...new Set(await codes)], ['IDP_KEYS_UNAVAILABLE'], 'all ten 503: the set could not be checked for their kids')
  t.equal(idp.calls, 2, 'one fetch for the ten')
})

t.test('issue 40: after a failed fetch, within its back-off, an unknown kid is answered at once, 503 with Retry-After; a known one verifies', async (t) => {
  const { set, idp, pending, fire } = provider([RSA_A])
  await set.start()
  idp.answer = () => new Response('down', { status: 503 })
  t.equal(await codeOf(set.keyFor('new-1', 'RS256')), 'IDP_KEYS_UNAVAILABLE', 'the fetch for it failed')
  t.equal(pending()?.delayMs, 5_000, 'retried in 5 s')
  idp.clock += 3_000
  const err = await set.keyFor('new-2', 'RS256').then(() => undefined, (e: unknown) => e)
  t.ok(isGatewayError(err) && err.statusCode === 503 && err.headers?.['retry-after'] === '2', 'in the back-off: 503, Retry-After: the 2 s left')
  t.match((err as Error).message, /test-idp's signing keys are unavailable: they hold no such key, and the last fetch of them failed/)
  t.equal(idp.calls, 2, 'and no fetch')
  t.ok(await set.keyFor('rsa-a', 'RS256'), 'a kid held still verifies (the keys are usable)')
  idp.answer = undefined
  idp.keys = [RSA_A, await publicJwk('ec', { kid: 'new-2' })]
  await fire()
  t.ok(await set.keyFor('new-2', 'ES256'), 'the retry found the new key')
  t.equal(idp.calls, 3)
})

t.test('issue 40: afterFetch answers from what is held, never fetching', async (t) => {
  const { set, idp } = provider([RSA_A])
  await set.start()
  t.equal(await codeOf(set.keyFor('new', 'RS256', true)), 'UNKNOWN_SIGNING_KEY', 'the last fetch succeeded: unknown')
  await t.rejects(async () => { await set.publishedKey('new', true) }, { code: 'UNKNOWN_SIGNING_KEY' })
  t.equal(idp.calls, 1, 'nothing fetched')
  t.ok(await set.keyFor('rsa-a', 'RS256', true))
})

t.test('issue 40: start(withinMs) bounds the first fetch by what is left of a longer wait (a real hanging server)', async (t) => {
  const hanging = new Set<ServerResponse>()
  const server = createServer((_req, res) => { hanging.add(res) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => {
    for (const res of hanging) res.destroy()
    server.closeAllConnections()
    server.close()
  })
  const set = createRemoteKeySet({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks`, name: 'hung', algorithms: ['RS256'], timeoutMs: 5000 })
  t.teardown(set.close)
  await t.rejects(set.start(300), /hung: the key set at .* did not answer within 300 ms/)
})
