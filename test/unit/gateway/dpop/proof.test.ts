// The DPoP proof verifier (gateway/src/dpop/proof.ts): proofs made by panva's `dpop` package, as a
// real client makes them, pass; each hostile one is refused with INVALID_DPOP_PROOF (or
// USE_DPOP_NONCE) and says why. The memory store keeps the jti marks and the nonces.
import { createPrivateKey, generateKeyPairSync, sign } from 'node:crypto'
import t from 'tap'
import { generateKeyPair as dpopKeyPair, generateProof } from 'dpop'
import { calculateJwkThumbprint, exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose'
import {
  accessTokenHash, createDpopVerifier, DEFAULT_DPOP_SETTINGS, dpopSettingsProblem, htuOf, tokenBinding, type ProofCheck
} from '../../../../gateway/src/dpop/proof.js'
import { isGatewayError } from '../../../../gateway/src/errors.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import { proofKey } from '../../../../gateway/src/dpop/signature.js'

const URI = 'https://api.example.com/v1/things'
const TOKEN = 'the.access.token'

async function refusal (promise: Promise<unknown>): Promise<{ code: string, message: string, headers: Record<string, string> | undefined }> {
  try {
    await promise
  } catch (err) {
    if (isGatewayError(err)) return { code: err.code, message: err.message, headers: err.headers as Record<string, string> | undefined }
    throw err
  }
  return { code: 'PASSED', message: '', headers: undefined }
}

/** a proof signed by hand with jose: any header and claims a hostile client likes */
async function handMade (header: Record<string, unknown>, claims: Record<string, unknown>, key?: CryptoKey): Promise<string> {
  const pair = await generateKeyPair('ES256', { extractable: true })
  const jwk = await exportJWK(pair.publicKey)
  return await new SignJWT({ htm: 'GET', htu: URI, iat: Math.floor(Date.now() / 1000), jti: crypto.randomUUID(), ath: accessTokenHash(TOKEN), ...claims })
    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk, ...header } as never).sign(key ?? pair.privateKey)
}

t.test('proofs from the dpop package pass once; each is bound to its key, request and token', async (t) => {
  const verifier = createDpopVerifier(DEFAULT_DPOP_SETTINGS, createMemoryStore())
  for (const alg of ['ES256', 'Ed25519', 'RS256', 'PS256'] as const) {
    const keys = await dpopKeyPair(alg)
    const jkt = await calculateJwkThumbprint(await exportJWK(keys.publicKey) as JWK)
    const proof = await generateProof(keys, `${URI}?page=2#top`, 'GET', undefined, TOKEN)
    const check: ProofCheck = { method: 'GET', uri: `${URI}?other=1`, proofs: [proof], accessToken: TOKEN, boundKey: jkt }
    const passed = await verifier.verify(check)
    t.equal(passed.thumbprint, jkt, `${alg}: the proof's key thumbprint (a query or fragment ignored on both sides)`)
    t.equal((await refusal(verifier.verify(check))).code, 'INVALID_DPOP_PROOF', `${alg}: the same proof again is refused (jti)`)
  }
  // a token endpoint: no token, no binding yet; the thumbprint is what it binds to
  const keys = await dpopKeyPair('ES256')
  const passed = await verifier.verify({ method: 'POST', uri: 'https://api.example.com/v1/auth/token', proofs: [await generateProof(keys, 'https://api.example.com/v1/auth/token', 'POST')] })
  t.equal(passed.thumbprint, await calculateJwkThumbprint(await exportJWK(keys.publicKey) as JWK), 'without a token: the key\'s thumbprint')
})

t.test('each hostile proof is refused with INVALID_DPOP_PROOF and says why', async (t) => {
  const verifier = createDpopVerifier(DEFAULT_DPOP_SETTINGS, createMemoryStore())
  const keys = await dpopKeyPair('ES256')
  const jkt = await calculateJwkThumbprint(await exportJWK(keys.publicKey) as JWK)
  const base = { method: 'GET', uri: URI, accessToken: TOKEN, boundKey: jkt }
  const good = async (): Promise<string> => await generateProof(keys, URI, 'GET', undefined, TOKEN)
  const other = await dpopKeyPair('ES256')
  const hmac = new TextEncoder().encode('a shared secret of enough length!!')
  const now = Math.floor(Date.now() / 1000)
  const privateJwk = await exportJWK((await generateKeyPair('ES256', { extractable: true })).privateKey)
  const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'dpop+jwt', jwk: await exportJWK(keys.publicKey) })).toString('base64url')}.` +
    `${Buffer.from(JSON.stringify({ htm: 'GET', htu: URI, iat: now, jti: 'n1', ath: accessTokenHash(TOKEN) })).toString('base64url')}.`
  const p384 = await exportJWK((await generateKeyPair('ES384', { extractable: true })).publicKey)
  const rsaJwk = await exportJWK((await generateKeyPair('RS256', { extractable: true })).publicKey)
  const rsaProof = async (bits: number): Promise<string> => {
    // signed by hand: jose refuses to sign with a key under 2048 bits
    const pair = generateKeyPairSync('rsa', { modulusLength: bits })
    const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
    const input = `${part({ alg: 'RS256', typ: 'dpop+jwt', jwk: pair.publicKey.export({ format: 'jwk' }) })}.` +
      part({ htm: 'GET', htu: URI, iat: now, jti: crypto.randomUUID(), ath: accessTokenHash(TOKEN) })
    return `${input}.${sign('sha256', Buffer.from(input), pair.privateKey).toString('base64url')}`
  }
  const withHeader = async (extra: Record<string, unknown>): Promise<string> => {
    // signed by hand: jose refuses to sign with an extension it does not know
    const pair = generateKeyPairSync('ec', { namedCurve: 'P-256' })
    const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
    const input = `${part({ alg: 'ES256', typ: 'dpop+jwt', jwk: pair.publicKey.export({ format: 'jwk' }), ...extra })}.` +
      part({ htm: 'GET', htu: URI, iat: now, jti: crypto.randomUUID(), ath: accessTokenHash(TOKEN) })
    return `${input}.${sign('sha256', Buffer.from(input), { key: pair.privateKey, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`
  }
  const cases: Array<[string, ProofCheck, RegExp]> = [
    ['no proof', { ...base, proofs: undefined }, /Send a DPoP proof/],
    ['two DPoP headers', { ...base, proofs: [await good(), await good()] }, /2 DPoP headers/],
    ['not a JWS', { ...base, proofs: ['a.b'] }, /compact form/],
    ['alg none', { ...base, proofs: [none] }, /alg "none"/],
    ['HS256', { ...base, proofs: [await new SignJWT({ htm: 'GET', htu: URI, iat: now, jti: 'h1' }).setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'abc' } } as never).sign(hmac)] }, /alg "HS256"/],
    ['a private key in jwk', { ...base, proofs: [await handMade({ jwk: privateJwk }, {})] }, /private key material \(d\)/],
    ['wrong typ', { ...base, proofs: [await handMade({ typ: 'JWT' }, {})] }, /typ is "JWT"/],
    ['a critical extension', { ...base, boundKey: undefined, proofs: [await withHeader({ crit: ['urn:x'], 'urn:x': 1 })] }, /JWS extension/],
    ['b64 false', { ...base, boundKey: undefined, proofs: [await withHeader({ b64: false, crit: ['b64'] })] }, /JWS extension/],
    ['wrong htm', { ...base, method: 'POST', proofs: [await good()] }, /htm is "GET"/],
    ['another path', { ...base, uri: 'https://api.example.com/v1/other', proofs: [await good()] }, /htu is/],
    ['another host', { ...base, uri: 'https://evil.example.com/v1/things', proofs: [await good()] }, /htu is/],
    ['another scheme', { ...base, uri: 'http://api.example.com/v1/things', proofs: [await good()] }, /htu is/],
    ['a stale iat', { ...base, proofs: [await handMade({}, { iat: now - 120 })] }, /iat/],
    ['a future iat', { ...base, proofs: [await handMade({}, { iat: now + 120 })] }, /iat/],
    ['no ath', { ...base, proofs: [await generateProof(keys, URI, 'GET')] }, /no ath/],
    ['a wrong ath', { ...base, proofs: [await generateProof(keys, URI, 'GET', undefined, 'another.token')] }, /ath is not the hash/],
    ['another key than cnf.jkt', { ...base, proofs: [await generateProof(other, URI, 'GET', undefined, TOKEN)] }, /another key/],
    ['an RSA key under 2048 bits', { ...base, boundKey: undefined, proofs: [await rsaProof(1024)] }, /fewer than 2048 bits/],
    ['an ES256 proof with a P-384 key', { ...base, boundKey: undefined, proofs: [await handMade({ jwk: p384 }, {})] }, /takes a key on P-256/],
    ['an ES256 proof with an RSA key', { ...base, boundKey: undefined, proofs: [await handMade({ jwk: rsaJwk }, {})] }, /takes a key of type EC/],
    ['a signature by another key than its jwk', { ...base, boundKey: undefined, proofs: [await handMade({ jwk: await exportJWK(keys.publicKey) }, {})] }, /signature does not verify/]
  ]
  for (const [name, check, why] of cases) {
    const { code, message } = await refusal(verifier.verify(check))
    t.equal(code, 'INVALID_DPOP_PROOF', `${name}: INVALID_DPOP_PROOF`)
    t.match(message, why, `${name}: the detail says why`)
  }
  t.equal((await refusal(verifier.verify({ ...base, proofs: [await good()] }))).code, 'PASSED', 'and a good proof still passes')
})

t.test('nonces: off by default; when on, a proof without the current one gets USE_DPOP_NONCE and the nonce to use', async (t) => {
  let clock = Date.now()
  const store = createMemoryStore(() => clock)
  const settings = { ...DEFAULT_DPOP_SETTINGS, nonceSeconds: 60, iatWindowSeconds: 600 }
  const verifier = createDpopVerifier(settings, store, () => clock)
  const other = createDpopVerifier(settings, store, () => clock)
  const keys = await dpopKeyPair('ES256')
  const check = async (nonce?: string): Promise<ProofCheck> =>
    ({ method: 'GET', uri: URI, proofs: [await generateProof(keys, URI, 'GET', nonce, TOKEN)], accessToken: TOKEN })
  const first = await refusal(verifier.verify(await check()))
  t.equal(first.code, 'USE_DPOP_NONCE', 'no nonce: USE_DPOP_NONCE')
  const nonce = first.headers?.['dpop-nonce'] as string
  t.match(nonce, /^[A-Za-z0-9_-]{32}$/, 'with the nonce in DPoP-Nonce')
  t.equal((await refusal(other.verify(await check(nonce)))).code, 'PASSED', 'the nonce passes at another verifier of the same store')
  t.equal((await refusal(verifier.verify(await check('made-up')))).code, 'USE_DPOP_NONCE', 'a made-up nonce: refused')
  clock += 60_000
  t.equal((await refusal(verifier.verify(await check(nonce)))).code, 'PASSED', 'the previous period\'s nonce still passes')
  clock += 60_000
  const late = await refusal(verifier.verify(await check(nonce)))
  t.equal(late.code, 'USE_DPOP_NONCE', 'two periods on: refused, with a new nonce')
  t.not(late.headers?.['dpop-nonce'], nonce)
})

t.test('settings and the URI rule', async (t) => {
  t.equal(dpopSettingsProblem(DEFAULT_DPOP_SETTINGS), undefined)
  t.match(dpopSettingsProblem({ ...DEFAULT_DPOP_SETTINGS, algorithms: ['ES256', 'HS256'] }), /HS256/, 'HS256 cannot be configured')
  t.match(dpopSettingsProblem({ ...DEFAULT_DPOP_SETTINGS, algorithms: ['none'] }), /none/, 'nor none')
  t.equal(htuOf('HTTPS://API.example.com:443/a/b?x=1#f'), 'https://api.example.com/a/b', 'scheme and host normalised, default port, query and fragment dropped')
  t.equal(htuOf('ftp://example.com/'), undefined)
  t.equal(htuOf('https://user:pw@example.com/'), undefined)
})

t.test('a token\'s cnf: jkt alone binds it; any other shape is refused, never read as unbound', async (t) => {
  const jkt = 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs'
  t.equal(tokenBinding({ sub: 'a' }), undefined, 'no cnf: a bearer token')
  t.equal(tokenBinding({ cnf: { jkt } }), jkt, 'cnf.jkt: bound to that key')
  for (const [name, cnf] of [
    ['cnf a string', jkt],
    ['cnf null', null],
    ['cnf an array', [{ jkt }]],
    ['jkt with padding', { jkt: `${jkt}=` }],
    ['cnf.jkt beside an mTLS certificate\'s x5t#S256', { jkt, 'x5t#S256': 'bwcK0esc3ACC3DB2Y5_lESsXE8o9ltc05O89jdN-dg2' }],
    ['cnf.jkt beside a jwk', { jkt, jwk: { kty: 'OKP', crv: 'Ed25519', x: 'AA' } }]
  ] as const) {
    t.type(tokenBinding({ cnf }), 'object', `${name}: refused (a problem), not a binding keygate checks`)
  }
})

t.test('a jti is remembered as long as any gateway of the store may still take its proof, whatever iat the client chose', async (t) => {
  // one store (its own clock, the real time), two gateways: A on time, B's clock 10 s behind
  let real = Date.parse('2026-12-06T05:00:00Z')
  const store = createMemoryStore(() => real)
  const onTime = createDpopVerifier(DEFAULT_DPOP_SETTINGS, store, () => real)
  const behind = createDpopVerifier(DEFAULT_DPOP_SETTINGS, store, () => real - 10_000)
  const keys = await dpopKeyPair('ES256')
  const jkt = await calculateJwkThumbprint(await exportJWK(keys.publicKey) as JWK)
  // a proof whose iat the client set near the window's old edge: 59 s ago
  const proof = await new SignJWT({ htm: 'GET', htu: URI, iat: Math.floor(real / 1000) - 59, jti: 'edge', ath: accessTokenHash(TOKEN) })
    .setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await exportJWK(keys.publicKey) } as never).sign(keys.privateKey)
  const check: ProofCheck = { method: 'GET', uri: URI, proofs: [proof], accessToken: TOKEN, boundKey: jkt }
  t.equal((await refusal(onTime.verify(check))).code, 'PASSED', 'gateway A takes it')
  real += 7_000
  t.equal((await refusal(behind.verify(check))).code, 'INVALID_DPOP_PROOF', '7 s later gateway B, whose iat window still holds it, refuses it as replayed')
})

t.test('an RSA key with a huge public exponent is refused before its (dear) verification', async (t) => {
  const verifier = createDpopVerifier(DEFAULT_DPOP_SETTINGS, createMemoryStore())
  // a valid 3072-bit key whose e is 3071 bits: d = e^-1 mod lcm(p-1, q-1)
  const big = (value: string): bigint => BigInt(`0x${Buffer.from(value, 'base64url').toString('hex')}`)
  const b64 = (value: bigint): string => {
    const hex = value.toString(16)
    return Buffer.from(hex.length % 2 === 0 ? hex : `0${hex}`, 'hex').toString('base64url')
  }
  const gcd = (a: bigint, b: bigint): bigint => b === 0n ? a : gcd(b, a % b)
  const inverse = (a: bigint, m: bigint): bigint => {
    let [r0, r1, s0, s1] = [a % m, m, 1n, 0n]
    while (r1 !== 0n) {
      const q = r0 / r1
      ;[r0, r1] = [r1, r0 - q * r1]
      ;[s0, s1] = [s1, s0 - q * s1]
    }
    return ((s0 % m) + m) % m
  }
  const base = generateKeyPairSync('rsa', { modulusLength: 3072 }).privateKey.export({ format: 'jwk' }) as Record<string, string>
  const [p, q] = [big(base.p as string), big(base.q as string)]
  const lambda = (p - 1n) * (q - 1n) / gcd(p - 1n, q - 1n)
  let e = (1n << 3070n) | 1n
  while (gcd(e, lambda) !== 1n) e += 2n
  const d = inverse(e, lambda)
  const privateJwk = { kty: 'RSA', n: base.n, e: b64(e), d: b64(d), p: base.p, q: base.q, dp: b64(d % (p - 1n)), dq: b64(d % (q - 1n)), qi: base.qi }
  const privateKey = createPrivateKey({ key: privateJwk as never, format: 'jwk' })
  const jwk = { kty: 'RSA', n: base.n, e: b64(e) }
  const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url')
  const input = `${part({ alg: 'RS256', typ: 'dpop+jwt', jwk })}.${part({ htm: 'POST', htu: URI, iat: Math.floor(Date.now() / 1000), jti: 'big-e' })}`
  const proof = `${input}.${sign('sha256', Buffer.from(input), privateKey).toString('base64url')}`
  const refused = await refusal(verifier.verify({ method: 'POST', uri: URI, proofs: [proof] }))
  t.equal(refused.code, 'INVALID_DPOP_PROOF', 'a token endpoint\'s proof (bound to no key yet) by that key: refused')
  t.match(refused.message, /exponent/, 'for its exponent')
})

t.test('a proof key is imported once and kept by its thumbprint; a refused one is never kept', async (t) => {
  const jwk = generateKeyPairSync('ec', { namedCurve: 'P-256' }).publicKey.export({ format: 'jwk' }) as Record<string, unknown>
  const first = proofKey({ ...jwk }, 'ES256')
  const again = proofKey({ ...jwk, kid: 'another member' }, 'ES256')
  if (typeof first === 'string' || typeof again === 'string') throw new Error('the key was refused')
  t.equal(again.key, first.key, 'the same key object: imported once')
  t.equal(again.thumbprint, first.thumbprint)
  t.match(proofKey({ ...jwk }, 'ES384'), /takes a key on P-384/, 'kept, it is still checked against the alg')
  const small = generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'jwk' }) as Record<string, unknown>
  t.match(proofKey(small, 'RS256'), /fewer than 2048 bits/)
  t.match(proofKey(small, 'RS256'), /fewer than 2048 bits/, 'refused again: not kept')
})
