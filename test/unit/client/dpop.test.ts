// @keygate/client's DPoP proofs (client/src/dpop.ts), read by jose and checked by keygate's own
// verifier (gateway/src/dpop/proof.ts): the header (typ, alg, the public jwk only), the claims
// (htm, htu without query or fragment, iat, a new jti each time, ath, the nonce), the RFC 7638
// thumbprint; and withDpopProof's one retry on a use_dpop_nonce answer, with the nonce remembered
// per origin and key pair. The fetch answers here are made by the test: what the client does with
// each kind of answer, which the system test (dpop-own-tokens) shows against keygate itself.
import t from 'tap'
import { calculateJwkThumbprint, compactVerify, decodeJwt, decodeProtectedHeader, importJWK, type JWK } from 'jose'
import {
  accessTokenHash, createClient, dpopProof, dpopThumbprint, generateDpopKey, SigningInputError, withDpopProof, type DpopKeyPair
} from '#client'
import { createDpopVerifier, DEFAULT_DPOP_SETTINGS } from '../../../gateway/src/dpop/proof.js'
import { createMemoryStore } from '../../../gateway/src/store/memory.js'

const URL_ = 'https://api.example.com/v1/clients/'
const TOKEN = 'header.payload.signature'

t.test('proofs: the header, the claims, the thumbprint; keygate\'s verifier takes each once', async (t) => {
  const verifier = createDpopVerifier(DEFAULT_DPOP_SETTINGS, createMemoryStore())
  for (const alg of ['ES256', 'EdDSA'] as const) {
    const keyPair = await generateDpopKey(alg)
    t.equal((keyPair.privateKey as { extractable: boolean }).extractable, false, `${alg}: the private key is not extractable`)
    const proof = await dpopProof({ keyPair, method: 'get', url: `${URL_}?limit=5#top`, accessToken: TOKEN })
    const header = decodeProtectedHeader(proof)
    t.equal(header.typ, 'dpop+jwt')
    t.equal(header.alg, alg)
    t.same(Object.keys(header.jwk ?? {}).sort(), alg === 'ES256' ? ['crv', 'kty', 'x', 'y'] : ['crv', 'kty', 'x'], `${alg}: the jwk holds public members only`)
    await compactVerify(proof, await importJWK(header.jwk as JWK, alg))
    const claims = decodeJwt(proof)
    t.match(claims, { htm: 'GET', htu: URL_, ath: await accessTokenHash(TOKEN) }, `${alg}: htm upper case, htu without query and fragment, ath`)
    t.ok(Math.abs((claims.iat ?? 0) - Date.now() / 1000) < 5, 'iat is now')
    t.equal(await dpopThumbprint(keyPair), await calculateJwkThumbprint(header.jwk as JWK), `${alg}: the thumbprint is jose's RFC 7638 one`)
    const again = await dpopProof({ keyPair, method: 'GET', url: URL_, accessToken: TOKEN })
    t.not(decodeJwt(again).jti, claims.jti, 'a new jti for each proof')
    const check = { method: 'GET', uri: URL_, accessToken: TOKEN, boundKey: await dpopThumbprint(keyPair) }
    t.equal((await verifier.verify({ ...check, proofs: [proof] })).thumbprint, check.boundKey, `${alg}: keygate's verifier accepts it`)
    await t.rejects(verifier.verify({ ...check, proofs: [proof] }), { code: 'INVALID_DPOP_PROOF' }, 'once')
  }
  const login = await dpopProof({ keyPair: await generateDpopKey(), method: 'POST', url: 'https://api.example.com/v1/auth/token' })
  t.equal(decodeJwt(login).ath, undefined, 'no ath without a token (a login)')
  await t.rejects(dpopProof({ keyPair: { privateKey: {}, publicKey: {} } as unknown as DpopKeyPair, method: 'GET', url: URL_ }), SigningInputError,
    'something that is not a key pair: a SigningInputError')
  const signing = (await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']) as unknown as DpopKeyPair).privateKey
  t.throws(() => createClient({ baseUrl: 'https://api.example.com', token: TOKEN, privateKey: signing, apiKey: 'a'.repeat(64), dpop: 'key' as never }),
    { name: 'SigningInputError', input: 'dpop' }, 'createClient checks the dpop option at once')
  const rsa = await crypto.subtle.generateKey({ name: 'RSA-PSS', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' },
    false, ['sign', 'verify']) as unknown as DpopKeyPair
  await t.rejects(dpopThumbprint(rsa), { name: 'SigningInputError', message: /ES256.*EdDSA/ }, 'an RSA pair: refused, saying which keys sign proofs')
})

t.test('withDpopProof: one retry with the nonce a use_dpop_nonce answer gives, then the nonce remembered for the origin', async (t) => {
  const keyPair = await generateDpopKey()
  const url = new URL(URL_)
  const sent: Array<string | undefined> = []
  const answers: Response[] = []
  const send = async (proof: string): Promise<Response> => {
    sent.push(decodeJwt(proof).nonce as string | undefined)
    return answers.shift() ?? new Response('{}')
  }
  const nonceAnswer = (status: number, nonce: string): Response => status === 401
    ? new Response('{}', { status, headers: { 'www-authenticate': 'DPoP algs="ES256", error="use_dpop_nonce"', 'dpop-nonce': nonce } })
    : new Response(JSON.stringify({ code: 'USE_DPOP_NONCE', error: 'use_dpop_nonce' }), { status, headers: { 'dpop-nonce': nonce } })

  answers.push(nonceAnswer(401, 'n1'))
  t.equal((await withDpopProof(keyPair, 'GET', url, TOKEN, send)).status, 200)
  t.same(sent, [undefined, 'n1'], '401 use_dpop_nonce: sent again once, with its nonce')
  sent.length = 0
  t.equal((await withDpopProof(keyPair, 'GET', url, TOKEN, send)).status, 200)
  t.same(sent, ['n1'], 'the next proof carries the origin\'s latest nonce')
  sent.length = 0
  answers.push(nonceAnswer(400, 'n2'), nonceAnswer(400, 'n3'))
  t.equal((await withDpopProof(keyPair, 'POST', url, undefined, send)).status, 400, 'a second refusal is answered as it is: one retry only')
  t.same(sent, ['n1', 'n2'], '400 use_dpop_nonce (a token endpoint): the retry with its nonce')
  sent.length = 0
  answers.push(new Response('{}', { status: 401, headers: { 'www-authenticate': 'DPoP error="invalid_dpop_proof"', 'dpop-nonce': 'n4' } }))
  t.equal((await withDpopProof(keyPair, 'GET', url, TOKEN, send)).status, 401, 'another refusal: no retry')
  t.same(sent, ['n3'], 'the nonce of the last answer was remembered, and used once')
  sent.length = 0
  await withDpopProof(keyPair, 'GET', new URL('https://other.example.com/'), TOKEN, send)
  t.same(sent, [undefined], 'another origin: no nonce of this one')
})
