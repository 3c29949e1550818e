// A key directory's own signature (directoryCheck): accepted as Cloudflare's web-bot-auth helper
// signs it ("@authority";req alone) and as the Web Bot Auth draft's possession proof signs it
// ("@authority";req "content-digest"), the latter made by Cloudflare's http-message-sig, an
// implementation independent of keygate's; content-digest checked against the exact bytes
// received, sha-256 or sha-512; a signature without "@authority";req refused, and one covering a
// component keygate cannot verify on an answer refused naming that component.
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import { exportJWK, type JWK } from 'jose'
import t from 'tap'
import { signatureHeaders, type Component, type Signer } from 'http-message-sig'
import { directoryResponseHeaders, helpers, HTTP_MESSAGE_SIGNATURES_DIRECTORY, jwkToKeyID, MediaType } from 'web-bot-auth'
import { signerFromJWK } from 'web-bot-auth/crypto'
import { AGENT_KEY_ALGORITHMS } from '../../../../gateway/src/agents/agent-directories.js'
import { signatureAgentOf } from '../../../../gateway/src/agents/signature-agent.js'
import { directoryCheck } from '../../../../gateway/src/auth/directory-signature.js'
import { publishedKeysOf } from '../../../../gateway/src/remote-keys/published-keys.js'

const AGENT = 'https://agent.test'
const URL_ASKED = new URL(`${AGENT}${HTTP_MESSAGE_SIGNATURES_DIRECTORY}`)
const TAG = 'http-message-signatures-directory'
const REQUEST_AUTHORITY: Component = { name: '@authority', parameters: new Map([['req', true]]) }

const { privateKey, publicKey } = generateKeyPairSync('ed25519')
const publicJwk: JWK = await exportJWK(publicKey)
const privateJwk: JWK = await exportJWK(privateKey)
const keyid = await jwkToKeyID(publicJwk as never, helpers.WEBCRYPTO_SHA256, helpers.BASE64URL_DECODE)
const { keys } = await publishedKeysOf([publicJwk], AGENT_KEY_ALGORITHMS, 'thumbprint')
const body = new TextEncoder().encode(JSON.stringify({ keys: [publicJwk] }))
const check = directoryCheck(signatureAgentOf(`"${AGENT}"`, 'sig1'))

/** an Ed25519 signer for http-message-sig, by Node's crypto */
const signer = (key: KeyObject = privateKey): Signer => ({ keyid, alg: 'ed25519', sign: (data) => new Uint8Array(sign(null, Buffer.from(data), key)) })
const digest = (algorithm: 'sha256' | 'sha512', bytes: Uint8Array): string =>
  `${algorithm.replace('sha', 'sha-')}=:${createHash(algorithm).update(bytes).digest('base64')}:`

/** the directory's answer's fields, signed by http-message-sig over `components` (the draft's: "@authority";req and content-digest) */
async function signedByHttpMessageSig (components: Component[],
  fields: Record<string, string> = { 'content-digest': digest('sha256', body) }): Promise<Headers> {
  const headers = new Headers({ 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY, ...fields })
  const created = new Date()
  const signed = await signatureHeaders({ request: { method: 'GET', url: URL_ASKED.href, headers: {} }, response: { status: 200, headers } }, {
    signer: signer(), components, key: 'sig1', keyid, tag: TAG, created, expires: new Date(created.getTime() + 300_000)
  })
  headers.set('signature', signed.Signature)
  headers.set('signature-input', signed['Signature-Input'])
  return headers
}

/** Why the check refuses the answer, or 'accepted'. */
function verdict (headers: Headers, bytes: Uint8Array = body, url: URL = URL_ASKED): string {
  try {
    check?.({ url, headers, keys, body: bytes })
    return 'accepted'
  } catch (err) {
    return (err as Error).message
  }
}

t.test('as Cloudflare\'s web-bot-auth helper signs it: "@authority";req alone', async (t) => {
  const headers = new Headers({ 'content-type': MediaType.HTTP_MESSAGE_SIGNATURES_DIRECTORY })
  const created = new Date()
  const signed = await directoryResponseHeaders({ request: new Request(URL_ASKED), response: new Response(body, { headers }) } as never,
    [await signerFromJWK(privateJwk)], { created, expires: new Date(created.getTime() + 300_000) })
  headers.set('signature', signed.Signature)
  headers.set('signature-input', signed['Signature-Input'])
  t.match(signed['Signature-Input'], /^binding0=\("@authority";req\)/)
  t.equal(verdict(headers), 'accepted')
})

t.test('as the draft\'s possession proof signs it: "@authority";req and content-digest, checked against the bytes received', async (t) => {
  const draft = await signedByHttpMessageSig([REQUEST_AUTHORITY, 'content-digest'])
  t.match(draft.get('signature-input'), /^sig1=\("@authority";req "content-digest"\)/, 'what http-message-sig wrote')
  t.equal(verdict(draft), 'accepted', 'sha-256')
  t.equal(verdict(await signedByHttpMessageSig([REQUEST_AUTHORITY, 'content-digest'], { 'content-digest': digest('sha512', body) })), 'accepted', 'sha-512')
  t.equal(verdict(await signedByHttpMessageSig([REQUEST_AUTHORITY, 'content-digest', 'cache-control'],
    { 'content-digest': digest('sha256', body), 'cache-control': 'max-age=300' })), 'accepted', 'and a plain field of the answer')

  const altered = new TextEncoder().encode(JSON.stringify({ keys: [publicJwk, publicJwk] }))
  t.match(verdict(draft, altered), /no signature on it verifies: sig1: covers "content-digest", which does not match the \d+ bytes received/,
    'other bytes than the digest\'s: refused')
  t.match(verdict(draft, body, new URL(`https://copy.test${HTTP_MESSAGE_SIGNATURES_DIRECTORY}`)), /sig1 does not verify over copy\.test$/,
    'copied to another host: refused')
})

t.test('refused: no "@authority";req, or a component keygate cannot verify (named)', async (t) => {
  const cases: Array<[string, Component[], Record<string, string>, RegExp]> = [
    ['content-digest alone', ['content-digest'], { 'content-digest': digest('sha256', body) }, /sig1 must cover "@authority";req/],
    ['@status', [REQUEST_AUTHORITY, '@status'], {}, /sig1: covers "@status", which keygate cannot verify on a directory's answer/],
    ['a field with a parameter', [REQUEST_AUTHORITY, { name: 'cache-control', parameters: new Map([['sf', true]]) }], { 'cache-control': 'max-age=300' },
      /sig1: covers "cache-control";sf, which keygate cannot verify/],
    ['a field the answer lacks', [REQUEST_AUTHORITY, 'x-dropped'], { 'x-dropped': 'signed, then taken off' }, /sig1: covers "x-dropped", which the answer does not have/],
    ['a digest of no algorithm keygate computes', [REQUEST_AUTHORITY, 'content-digest'], { 'content-digest': 'md5=:AAAA:' },
      /sig1: covers "content-digest", which does not match the \d+ bytes received: Content-Digest has no digest keygate computes/]
  ]
  for (const [what, components, fields, why] of cases) {
    const headers = await signedByHttpMessageSig(components, fields).catch(async () => undefined)
    if (headers === undefined) {
      t.fail(`${what}: http-message-sig would not sign it`)
      continue
    }
    headers.delete('x-dropped')
    t.match(verdict(headers), why, `${what}: ${verdict(headers)}`)
  }
  const draft = await signedByHttpMessageSig([REQUEST_AUTHORITY, 'content-digest'])
  draft.set('signature-input', (draft.get('signature-input') ?? '').replace('"@authority";req', '"@authority"'))
  t.match(verdict(draft), /sig1 must cover "@authority";req/, '"@authority" without req (http-message-sig signs no such thing on an answer)')
})
