// The RFC 9421 stages one by one: which scheme a request takes, Signature-Input/Signature parsing
// and the choice among several signatures, the keyid look-up, created/expires, Content-Digest, and
// the signature stage with keys of all three types (RSA, Ed25519, P-256) through the verify
// dispatcher. The RFC's own examples are in message-signature-vectors.test.ts; the whole path on
// a real gateway in test/system/rfc9421.test.ts.
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import t from 'tap'
import { checkContentDigest, checkUnseenContentDigest, contentDigestOf } from '../../../../gateway/src/auth/content-digest.js'
import { keyIdStage } from '../../../../gateway/src/auth/key-id.js'
import { messageSignatureHeadersStage } from '../../../../gateway/src/auth/message-signature-headers.js'
import { messageSignatureStage } from '../../../../gateway/src/auth/message-signature.js'
import { schemeOf } from '../../../../gateway/src/auth/scheme.js'
import type { AuthState, MessageSignatureInput } from '../../../../gateway/src/auth/stage.js'
import type { RegisteredKey } from '../../../../gateway/src/keys/key-registry.js'
import { apiKeyOf } from '../../../../gateway/src/keys/public-key.js'
import { createdStage } from '../../../../gateway/src/auth/timestamp.js'
import { createKeyRegistry } from '../../../../gateway/src/keys/key-registry.js'
import { createMemoryStore } from '../../../../gateway/src/store/memory.js'
import type { DescribedRequest } from '../../../../gateway/src/auth/described-request.js'
import { captureGatewayError, describedRequest, rsaPair, signBase64 } from '../../../helpers/auth-fixtures.js'

const NOW = 1_700_000_000_000
const CREATED = NOW / 1000

t.test('the scheme: the route\'s when it takes one; else RFC 9421 for Signature-Input without X-API-Signature', async (t) => {
  const rfc = describedRequest({ headers: { 'signature-input': 'sig=()', signature: 'sig=:AA==:' } })
  const seed = describedRequest({ headers: { 'x-api-signature': 'AA==' } })
  const both = describedRequest({ headers: { 'signature-input': 'sig=()', 'x-api-signature': 'AA==' } })
  t.equal(schemeOf(rfc, {}), 'rfc9421')
  t.equal(schemeOf(seed, {}), 'seed')
  t.equal(schemeOf(both, {}), 'seed', 'both: the seed\'s headers win')
  t.equal(schemeOf(describedRequest(), {}), 'seed', 'neither: the seed\'s MISSING_SIGNATURE_HEADERS, as before')
  t.equal(schemeOf(rfc, { signaturePolicy: 'seed' }), 'seed')
  t.equal(schemeOf(seed, { signaturePolicy: 'rfc9421' }), 'rfc9421')
})

t.test('Signature-Input and Signature: malformed, missing members, labels', async (t) => {
  const stage = messageSignatureHeadersStage()
  const key = 'a'.repeat(64)
  const run = async (headers: Record<string, string>, state: AuthState = {}) =>
    await captureGatewayError(() => stage.run(describedRequest({ headers }), state))
  t.equal((await run({ 'signature-input': 'sig=("@method")' })).code, 'MISSING_SIGNATURE_HEADERS')
  const unparsable = await run({ 'signature-input': 'sig=("@method"', signature: 'sig=:AA==:' })
  t.equal(unparsable.code, 'INVALID_SIGNATURE')
  t.match(unparsable.message, /Structured Fields dictionary/)
  t.match((await run({ 'signature-input': `sig=("@method");keyid="${key}"`, signature: 'other=:AA==:' })).message, /Signature has no member sig/)
  t.match((await run({ 'signature-input': `sig=("@method");keyid="${key}"`, signature: 'sig="AA=="' })).message, /byte sequence/)
  t.match((await run({ 'signature-input': `sig=("@method");keyid="${key}";created=1.5`, signature: 'sig=:AA==:' })).message, /parameter created is a decimal/)
  t.equal((await run({ 'signature-input': 'sig=("@method");keyid="test-key"', signature: 'sig=:AA==:' })).code, 'UNKNOWN_API_KEY',
    'no keyid that is an apiKey')
  const labelled = await run({ 'signature-input': `sig=("@method");keyid="${key}"`, signature: 'sig=:AA==:' }, { signatureLabel: 'gw' })
  t.match(labelled.message, /labelled gw; Signature-Input has sig/)

  const state: AuthState = {}
  await stage.run(describedRequest({
    headers: {
      'signature-input': 'other=("@method");keyid="x", ' +
        `sig=("@method" "@path" "@query-param";name="a");created=${CREATED};keyid="${key}";alg="ed25519";nonce="n"`,
      signature: 'other=:AA==:, sig=:AQID:'
    }
  }), state)
  const [input] = state.messageSignatures ?? []
  t.equal(state.messageSignatures?.length, 1, 'only signatures whose keyid looks like an apiKey')
  t.equal(input?.label, 'sig')
  t.equal(input?.signatureParams, `("@method" "@path" "@query-param";name="a");created=${CREATED};keyid="${key}";alg="ed25519";nonce="n"`,
    'the parameters serialised again in the order received')
  t.same([input?.alg, input?.created, input?.nonce, [...(input?.signature ?? [])]], ['ed25519', CREATED, 'n', [1, 2, 3]])
})

t.test('created and expires', async (t) => {
  const stage = createdStage(() => NOW)
  const base = { label: 'sig', components: [], params: [], signatureParams: '()', keyid: 'k', alg: undefined, nonce: undefined, signature: Buffer.alloc(0) }
  const run = async (created: number | undefined, expires?: number) =>
    await captureGatewayError(() => stage.run(describedRequest(), { messageSignature: { ...base, created, expires } }))
  t.equal((await run(undefined)).code, 'TIMESTAMP_INVALID')
  t.match((await run(NOW)).message, /milliseconds/)
  const stale = await run(CREATED - 16 * 60)
  t.equal(stale.code, 'TIMESTAMP_OUT_OF_RANGE')
  t.equal(stale.extra?.serverTime, NOW)
  t.equal((await run(CREATED + 16 * 60)).code, 'TIMESTAMP_OUT_OF_RANGE', 'from the future too')
  t.match((await run(CREATED - 60, CREATED - 1)).message, /expired 1 s ago/)
  const state: AuthState = { messageSignature: { ...base, created: CREATED - 60, expires: CREATED + 60 } }
  await stage.run(describedRequest(), state)
  t.equal(state.timestampMs, NOW - 60_000)
})

t.test('Content-Digest', async (t) => {
  const body = Buffer.from('{"a":1}')
  const sha256 = contentDigestOf('sha-256', body)
  const sha512 = contentDigestOf('sha-512', body)
  t.doesNotThrow(() => { checkContentDigest(sha256, body) })
  t.doesNotThrow(() => { checkContentDigest(`${sha512}, ${sha256}`, body) }, 'both, each checked')
  t.doesNotThrow(() => { checkContentDigest(`md5=:AAAA:, ${sha256}`, body) }, 'an unknown one beside a known one is ignored')
  t.doesNotThrow(() => { checkContentDigest(contentDigestOf('sha-256', Buffer.alloc(0)), Buffer.alloc(0)) }, 'the empty body has a digest too')
  const wrong = await captureGatewayError(() => { checkContentDigest(`${sha256}, sha-512=:${Buffer.alloc(64).toString('base64')}:`, body) })
  t.equal(wrong.code, 'INVALID_CONTENT_DIGEST')
  t.equal(wrong.extra?.computed, sha512)
  t.match((await captureGatewayError(() => { checkContentDigest('md5=:AAAA:', body) })).message, /no digest keygate computes \(md5\)/)
  t.match((await captureGatewayError(() => { checkContentDigest('sha-256=AAAA', body) })).message, /byte sequence|Structured Fields/)
  t.equal((await captureGatewayError(() => { checkContentDigest(sha256, Buffer.from('{"a": 1}')) })).code, 'INVALID_CONTENT_DIGEST')
})

t.test('Content-Digest of a body keygate is not shown: only a field no body could match is refused', async (t) => {
  const sha256 = contentDigestOf('sha-256', Buffer.from('{"a":1}'))
  t.doesNotThrow(() => { checkUnseenContentDigest(sha256) })
  t.doesNotThrow(() => { checkUnseenContentDigest(`md5=:AAAA:, ${contentDigestOf('sha-512', Buffer.alloc(0))}`) }, 'an unknown one beside a known one')
  for (const field of ['md5=:AAAA:', 'sha-256=AAAA', 'sha-256="abc"', 'sha-256=:YWJj:']) {
    const err = await captureGatewayError(() => { checkUnseenContentDigest(field) })
    t.equal(err.code, 'INVALID_CONTENT_DIGEST', field)
    t.equal(err.extra?.computed, undefined, `${field}: no digest of a body it was not shown`)
  }
})

t.test('the keyid: the first signature whose key is registered', async (t) => {
  const registry = createKeyRegistry(createMemoryStore(), { cacheSize: 100 })
  const pair = rsaPair()
  const record = await registry.register({ owner: 'alice', name: 'laptop', publicKey: pair.spkiPem, signature: signBase64(pair.privateKey, 'laptop') })
  const stage = keyIdStage(registry)
  const input = (label: string, keyid: string) => ({
    label,
    keyid,
    components: [],
    params: [],
    signatureParams: '()',
    alg: undefined,
    created: undefined,
    expires: undefined,
    nonce: undefined,
    signature: Buffer.alloc(0)
  })
  const state: AuthState = { user: 'alice', messageSignatures: [input('a', 'f'.repeat(64)), input('b', record.apiKey)] }
  await stage.run(describedRequest(), state)
  t.equal(state.messageSignature?.label, 'b')
  t.equal(state.key?.apiKey, record.apiKey)
  const neither: AuthState = { user: 'alice', messageSignatures: [input('a', 'f'.repeat(64)), input('b', 'e'.repeat(64))] }
  const unknown = await captureGatewayError(() => stage.run(describedRequest(), neither))
  t.equal(unknown.code, 'UNKNOWN_API_KEY')
  t.match(unknown.message, new RegExp(`keyid ${'f'.repeat(64)} \\(Signature-Input a\\) is not a registered key`))
})

/** A request signed over @method, @target-uri and content-digest by `privateKey` with `alg`. */
function signedRequest (privateKey: KeyObject, alg: string, body: string, options: { target?: string } = {}) {
  const target = options.target ?? '/v1/clients/?x=1'
  const digest = contentDigestOf('sha-256', Buffer.from(body))
  const params = `("@method" "@target-uri" "content-digest");created=${CREATED};keyid="k";alg="${alg}"`
  const base = `"@method": POST\n"@target-uri": https://api.example.com${target}\n"content-digest": ${digest}\n"@signature-params": ${params}`
  const signer = alg === 'ecdsa-p256-sha256' ? { key: privateKey, dsaEncoding: 'ieee-p1363' as const } : privateKey
  const signature = sign(alg === 'ed25519' ? null : 'sha256', Buffer.from(base), signer)
  const headers = { 'signature-input': `sig=${params}`, signature: `sig=:${signature.toString('base64')}:`, 'content-digest': digest }
  const request = describedRequest({ method: 'POST', url: target, headers, body: Buffer.from(body), scheme: 'https', authority: 'api.example.com' })
  return { request, base }
}

const PAIRS = {
  'rsa-v1_5-sha256': () => generateKeyPairSync('rsa', { modulusLength: 2048 }),
  ed25519: () => generateKeyPairSync('ed25519'),
  'ecdsa-p256-sha256': () => generateKeyPairSync('ec', { namedCurve: 'prime256v1' })
}

/** The state the stages before the signature stage leave: the key, the signature labelled sig. */
async function stateFor (request: DescribedRequest, key: RegisteredKey): Promise<AuthState> {
  const state: AuthState = { signatureLabel: 'sig', key }
  await messageSignatureHeadersStage().run(request, state)
  return { ...state, messageSignature: state.messageSignatures?.[0] }
}

t.test('the signature stage with RSA, Ed25519 and P-256 keys', async (t) => {
  for (const [alg, generate] of Object.entries(PAIRS)) {
    const pair = generate()
    const apiKey = apiKeyOf(pair.publicKey)
    const key = { apiKey, owner: 'alice', name: alg, keyObject: pair.publicKey }
    const failures: string[] = []
    const stage = messageSignatureStage(undefined, () => failures.push(alg))

    const good = signedRequest(pair.privateKey, alg, '{"a":1}')
    const state = await stateFor(good.request, key)
    await stage.run(good.request, state)
    t.equal(state.replayId, createHash('sha256').update('rfc9421\n').update(apiKey).update('\n').update(good.base).digest('hex'), `${alg}: verifies`)
    t.same(failures, [])

    const forged = signedRequest(generate().privateKey, alg, '{"a":1}')
    const err = await captureGatewayError(async () => { await stage.run(forged.request, await stateFor(forged.request, key)) })
    t.equal(err.code, 'INVALID_SIGNATURE', `${alg}: another key's signature`)
    t.equal(err.extra?.signatureBaseSha256, createHash('sha256').update(forged.base).digest('hex'))
    t.same(err.extra?.signatureBase, forged.base.split('\n'))
    t.same(failures, [alg], `${alg}: the budget hears of it`)

    const uncovered = signedRequest(pair.privateKey, alg, '{"a":1}', { target: '/v1/clients/?x=1' })
    const input = (await stateFor(uncovered.request, key))
    const missing = await captureGatewayError(() => stage.run(uncovered.request, {
      ...input, messageSignature: { ...(input.messageSignature as MessageSignatureInput), components: [{ name: '@method' }, { name: '@path' }] }
    }))
    t.same(missing.extra?.missingComponents, ['@query', 'content-digest'])
  }
})
