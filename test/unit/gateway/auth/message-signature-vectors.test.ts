// The RFC 9421 Appendix B.2 examples that use asymmetric keys, verified by the gateway's own code
// (the Signature-Input/Signature parser, the signature base, the algorithm dispatcher, the
// Content-Digest check) with the RFC's own test keys (test/fixtures/rfc9421): B.2.1, B.2.2 and
// B.2.3 (rsa-pss-sha512), B.2.4 (ecdsa-p256-sha256, a response) and B.2.6 (ed25519). The RFC has no
// rsa-v1_5-sha256 example with a signature value; that algorithm is verified against
// http-message-signatures in test/system/rfc9421.test.ts.
import { createPublicKey, type KeyObject } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { keyTypeOf } from '../../../../gateway/src/keys/public-key.js'
import t from 'tap'
import { requestComponentValue, signatureBase, type SignedMessage } from '@keygate/client/protocol'
import { checkContentDigest } from '../../../../gateway/src/auth/content-digest.js'
import { messageSignatureHeadersStage } from '../../../../gateway/src/auth/message-signature-headers.js'
import {
  algorithmFor, messageSignatureBase, missingComponents, verifyMessageSignature
} from '../../../../gateway/src/auth/message-signature.js'
import type { AuthState, MessageSignatureInput } from '../../../../gateway/src/auth/stage.js'
import { captureGatewayError, describedRequest } from '../../../helpers/auth-fixtures.js'

const FIXTURES = join(import.meta.dirname, '../../../fixtures/rfc9421')

/**
 * The public half of an RFC test key, as a registered key would be. test-key-rsa-pss is an
 * RSASSA-PSS (OID) key: its RSAPublicKey, taken out of the SPKI (SEQUENCE, AlgorithmIdentifier,
 * BIT STRING with a long length and no unused bits), makes the plain RSA key keygate registers.
 */
function publicKey (name: string): KeyObject {
  const key = createPublicKey(readFileSync(join(FIXTURES, `${name}.pem`)))
  if (key.asymmetricKeyType !== 'rsa-pss') return key
  const spki = key.export({ type: 'spki', format: 'der' })
  const rsaPublicKey = spki.subarray(4 + 2 + (spki[5] as number) + 4 + 1)
  return createPublicKey({ key: rsaPublicKey, format: 'der', type: 'pkcs1' })
}

const KEYS = {
  'test-key-rsa-pss': publicKey('test-key-rsa-pss'),
  'test-key-ecc-p256': publicKey('test-key-ecc-p256'),
  'test-key-ed25519': publicKey('test-key-ed25519')
}

// RFC 9421 §B.2: the request of the examples
const BODY = '{"hello": "world"}'
const HEADERS: Record<string, string> = {
  host: 'example.com',
  date: 'Tue, 20 Apr 2021 02:07:55 GMT',
  'content-type': 'application/json',
  'content-digest': 'sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:',
  'content-length': '18'
}
const MESSAGE: SignedMessage = {
  method: 'POST',
  target: '/foo?param=Value&Pet=dog',
  scheme: 'https',
  authority: 'example.com',
  field: (name) => HEADERS[name] === undefined ? undefined : [HEADERS[name] as string]
}

/** The one signature labelled `label` of Signature-Input and Signature, parsed as the gateway parses them. */
async function parsed (label: string, signatureInput: string, signature: string): Promise<MessageSignatureInput> {
  const state: AuthState = { signatureLabel: label }
  await messageSignatureHeadersStage().run(describedRequest({ headers: { 'signature-input': signatureInput, signature } }), state)
  return state.messageSignatures?.[0] as MessageSignatureInput
}

const REQUEST_EXAMPLES = [
  {
    section: 'B.2.1 minimal signature (rsa-pss-sha512)',
    label: 'sig-b21',
    input: 'sig-b21=();created=1618884473;keyid="test-key-rsa-pss";nonce="b3k2pp5k7z-50gnwp.yemd"',
    signature: 'sig-b21=:d2pmTvmbncD3xQm8E9ZV2828BjQWGgiwAaw5bAkgibUopemLJcWDy/lkbbHAve4cRAtx31Iq786U7it++wgGxbtRxf8Udx7zFZsckzXaJMkA7ChG52eSkFxykJ' +
      'eNqsrWH5S+oxNFlD4dzVuwe8DhTSja8xxbR/Z2cOGdCbzR72rgFWhzx2VjBqJzsPLMIQKhO4DGezXehhWwE56YCE+O6c0mKZsfxVrogUvA4HELjVKWmAvtl6UnCh8jYzuVG5WSb/QEVPnP5Tmc' +
      'AnLH1g+s++v6d4s8m0gCw1fV5/SITLq9mhho8K3+7EPYTU8IU1bLhdxO5Nyt8C8ssinQ98Xw9Q==:',
    base: '"@signature-params": ();created=1618884473;keyid="test-key-rsa-pss";nonce="b3k2pp5k7z-50gnwp.yemd"'
  },
  {
    section: 'B.2.2 selective covered components (rsa-pss-sha512)',
    label: 'sig-b22',
    input: 'sig-b22=("@authority" "content-digest" "@query-param";name="Pet")' +
      ';created=1618884473;keyid="test-key-rsa-pss";tag="header-example"',
    signature: 'sig-b22=:LjbtqUbfmvjj5C5kr1Ugj4PmLYvx9wVjZvD9GsTT4F7GrcQEdJzgI9qHxICagShLRiLMlAJjtq6N4CDfKtjvuJyE5qH7KT8UCMkSowOB4+ECxCmT8rtAmj/0PIXxi0A0nx' +
      'KyB09RNrCQibbUjsLS/2YyFYXEu4TRJQzRw1rLEuEfY17SARYhpTlaqwZVtR8NV7+4UKkjqpcAoFqWFQh62s7Cl+H2fjBSpqfZUJcsIk4N6wiKYd4je2U/lankenQ99PZfB4jY3I5rSV2DSBVk' +
      'SFsURIjYErOs0tFTQosMTAoxk//0RoKUqiYY8Bh0aaUEb0rQl3/XaVe4bXTugEjHSw==:',
    base: '"@authority": example.com\n' +
      `"content-digest": ${HEADERS['content-digest'] as string}\n` +
      '"@query-param";name="Pet": dog\n' +
      '"@signature-params": ("@authority" "content-digest" "@query-param";name="Pet")' +
      ';created=1618884473;keyid="test-key-rsa-pss";tag="header-example"'
  },
  {
    section: 'B.2.3 full coverage (rsa-pss-sha512)',
    label: 'sig-b23',
    input: 'sig-b23=("date" "@method" "@path" "@query" "@authority" "content-type" "content-digest" "content-length")' +
      ';created=1618884473;keyid="test-key-rsa-pss"',
    signature: 'sig-b23=:bbN8oArOxYoyylQQUU6QYwrTuaxLwjAC9fbY2F6SVWvh0yBiMIRGOnMYwZ/5MR6fb0Kh1rIRASVxFkeGt683+qRpRRU5p2voTp768ZrCUb38K0fUxN0O0iC59DzYx8' +
      'DFll5GmydPxSmme9v6ULbMFkl+V5B1TP/yPViV7KsLNmvKiLJH1pFkh/aYA2HXXZzNBXmIkoQoLd7YfW91kE9o/CCoC1xMy7JA1ipwvKvfrs65ldmlu9bpG6A9BmzhuzF8' +
      'Eim5f8ui9eH8LZH896+QIF61' +
      'ka39VBrohr9iyMUJpvRX2Zbhl5ZJzSRxpJyoEZAFL2FUo5fTIztsDZKEgM4cUA==:',
    base: '"date": Tue, 20 Apr 2021 02:07:55 GMT\n"@method": POST\n"@path": /foo\n"@query": ?param=Value&Pet=dog\n"@authority": example.com\n' +
      `"content-type": application/json\n"content-digest": ${HEADERS['content-digest'] as string}\n"content-length": 18\n` +
      '"@signature-params": ("date" "@method" "@path" "@query" "@authority" "content-type" "content-digest" "content-length")' +
      ';created=1618884473;keyid="test-key-rsa-pss"'
  },
  {
    section: 'B.2.6 ed25519',
    label: 'sig-b26',
    input: 'sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"',
    signature: 'sig-b26=:wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==:',
    base: '"date": Tue, 20 Apr 2021 02:07:55 GMT\n"@method": POST\n"@path": /foo\n"@authority": example.com\n' +
      '"content-type": application/json\n"content-length": 18\n' +
      '"@signature-params": ("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519"'
  }
] as const

t.test('the RFC\'s request is consistent: its Content-Digest is the body\'s', async (t) => {
  t.doesNotThrow(() => { checkContentDigest(HEADERS['content-digest'] as string, Buffer.from(BODY)) })
  const err = await captureGatewayError(() => { checkContentDigest(HEADERS['content-digest'] as string, Buffer.from(`${BODY}\n`)) })
  t.equal(err.code, 'INVALID_CONTENT_DIGEST')
})

for (const example of REQUEST_EXAMPLES) {
  t.test(example.section, async (t) => {
    const input = await parsed(example.label, example.input, example.signature)
    const key = KEYS[input.keyid as keyof typeof KEYS]
    const base = messageSignatureBase(MESSAGE, input)
    t.equal(base, example.base, 'the signature base, byte for byte as the RFC prints it')
    const rsa = keyTypeOf(key) === 'rsa'
    // no alg in the examples: without one an RSA key means rsa-v1_5-sha256 to keygate, so a client names rsa-pss-sha512
    if (rsa) t.equal(algorithmFor(key, input), 'rsa-v1_5-sha256')
    const alg = algorithmFor(key, rsa ? { ...input, alg: 'rsa-pss-sha512' } : input)
    t.equal(alg, rsa ? 'rsa-pss-sha512' : 'ed25519')
    t.ok(verifyMessageSignature(key, alg, Buffer.from(base), input.signature), 'verifies')
    const tampered = Buffer.from(input.signature)
    tampered[10] = (tampered[10] as number) ^ 1
    t.notOk(verifyMessageSignature(key, alg, Buffer.from(base), tampered), 'a bit flipped in the signature: does not verify')
    t.notOk(verifyMessageSignature(key, alg, Buffer.from(base.replace('created=1618884473', 'created=1618884474')), input.signature),
      'another base: does not verify')
  })
}

t.test('B.2.4 a response signed with ecdsa-p256-sha256 (ieee-p1363 r||s)', async (t) => {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'content-digest': 'sha-512=:mEWXIS7MaLRuGgxOBdODa3xqM1XdEvxoYhvlCFJ41QJgJc4GTsPp29l5oGX69wWdXymyU0rjJuahq4l5aGgfLQ==:',
    'content-length': '23'
  }
  const input = await parsed('sig-b24',
    'sig-b24=("@status" "content-type" "content-digest" "content-length");created=1618884473;keyid="test-key-ecc-p256"',
    'sig-b24=:wNmSUAhwb5LxtOtOpNa6W5xj067m5hFrj0XQ4fvpaCLx0NKocgPquLgyahnzDnDAUy5eCdlYUEkLIj+32oiasw==:')
  checkContentDigest(headers['content-digest'] as string, Buffer.from('{"message": "good dog"}'))
  // @status is a response's component, which a gateway never verifies: resolved here, the rest by the protocol helpers
  const response: SignedMessage = { ...MESSAGE, field: (name) => headers[name] === undefined ? undefined : [headers[name] as string] }
  const base = signatureBase(input.components.map((component) =>
    [component, component.name === '@status' ? '200' : requestComponentValue(response, component)] as const), input.signatureParams)
  t.equal(base, '"@status": 200\n"content-type": application/json\n' +
    `"content-digest": ${headers['content-digest'] as string}\n"content-length": 23\n` +
    '"@signature-params": ("@status" "content-type" "content-digest" "content-length");created=1618884473;keyid="test-key-ecc-p256"')
  const key = KEYS['test-key-ecc-p256']
  t.equal(keyTypeOf(key), 'p256')
  const alg = algorithmFor(key, input)
  t.equal(alg, 'ecdsa-p256-sha256')
  t.equal(input.signature.length, 64)
  t.ok(verifyMessageSignature(key, alg, Buffer.from(base), input.signature), 'verifies')
  t.notOk(verifyMessageSignature(key, alg, Buffer.from(base.replace('200', '201')), input.signature), 'another status: does not verify')
})

t.test('an alg that does not suit the key, and one keygate does not know', async (t) => {
  const input = { label: 'sig', alg: 'ed25519' }
  const err = await captureGatewayError(() => algorithmFor(KEYS['test-key-rsa-pss'], input))
  t.equal(err.code, 'INVALID_SIGNATURE')
  t.same(err.extra?.acceptedAlgorithms, ['rsa-v1_5-sha256', 'rsa-pss-sha512'])
  const unknown = await captureGatewayError(() => algorithmFor(KEYS['test-key-ed25519'], { label: 'sig', alg: 'hmac-sha256' }))
  t.match(unknown.message, /is not an algorithm of the key/)
})

t.test('the components a signature must cover', async (t) => {
  const ids = (...names: string[]) => names.map((name) => ({ name }))
  t.same(missingComponents(ids('@method', '@target-uri', 'content-digest'), '/a?b=1', true), [])
  t.same(missingComponents(ids('@method', '@path', '@query'), '/a?b=1', false), [])
  t.same(missingComponents(ids('@method', '@path'), '/a', false), [])
  t.same(missingComponents(ids('@method', '@path'), '/a?b=1', false), ['@query'])
  t.same(missingComponents(ids('@method', '@request-target'), '/a?b=1', false), [], '@request-target covers path and query')
  t.same(missingComponents(ids('@authority'), '/a', true), ['@method', '@target-uri or @path', 'content-digest'])
})
