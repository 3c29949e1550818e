// What verifying a request's signature costs the gateway's process, measured alone, per scheme and
// key type: the seed's X-API-Signature (signature.ts) next to RFC 9421 (Signature-Input and
// Signature parsed with structured-headers, Content-Digest, the signature base, the verification:
// message-signature-headers.ts and message-signature.ts), with RSA-2048 (PKCS#1 v1.5 and PSS),
// Ed25519 and ECDSA P-256 keys; and RFC 9421's parsing alone. A POST of a 60-byte JSON body
// covering @method, @target-uri, content-type and content-digest. Run it with
//   node --conditions=keygate-source --import tsx bench/message-signature-cost.ts
// It prints this process's CPU time per request (median of rounds).
import { createHash, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import type { DescribedRequest } from '../gateway/src/auth/described-request.js'
import { signingString } from '@keygate/client/protocol'
import { messageSignatureHeadersStage } from '../gateway/src/auth/message-signature-headers.js'
import { messageSignatureStage } from '../gateway/src/auth/message-signature.js'
import { signatureStage } from '../gateway/src/auth/signature.js'
import type { AuthStage, AuthState } from '../gateway/src/auth/stage.js'
import { apiKeyOf } from '../gateway/src/keys/public-key.js'

const ROUNDS = 5
const BODY = Buffer.from('{"name":"Ada","email":"ada@example.com","tax_id":"12345678"}')
const TARGET = '/v1/clients/'
const HOST = 'api.example.com'

function request (headers: Record<string, string>): DescribedRequest {
  return {
    method: 'POST',
    target: TARGET,
    headers,
    field: (name) => headers[name] === undefined ? undefined : [headers[name] as string],
    scheme: 'https',
    authority: HOST,
    ip: '192.0.2.1',
    declaresBody: true,
    declaredLength: BODY.length,
    body: BODY
  }
}

function rfc9421Request (privateKey: KeyObject, apiKey: string, alg: string): DescribedRequest {
  const digest = `sha-256=:${createHash('sha256').update(BODY).digest('base64')}:`
  const params = `("@method" "@target-uri" "content-type" "content-digest");created=${Math.floor(Date.now() / 1000)};keyid="${apiKey}";alg="${alg}"`
  const base = `"@method": POST\n"@target-uri": https://${HOST}${TARGET}\n"content-type": application/json\n` +
    `"content-digest": ${digest}\n"@signature-params": ${params}`
  const options = alg === 'ecdsa-p256-sha256'
    ? { key: privateKey, dsaEncoding: 'ieee-p1363' as const }
    : alg === 'rsa-pss-sha512' ? { key: privateKey, padding: 6, saltLength: 64 } : privateKey
  const signature = sign(alg === 'ed25519' ? null : alg === 'rsa-pss-sha512' ? 'sha512' : 'sha256', Buffer.from(base), options)
  return request({
    'content-type': 'application/json', 'content-digest': digest, 'signature-input': `sig=${params}`, signature: `sig=:${signature.toString('base64')}:`
  })
}

/** CPU microseconds per run of `once` (median of rounds), `count` runs a round. */
function cpuPerRun (count: number, once: () => void): number {
  const results: number[] = []
  for (let round = 0; round < ROUNDS; round++) {
    const cpu = process.cpuUsage()
    for (let i = 0; i < count; i++) once()
    const used = process.cpuUsage(cpu)
    results.push((used.user + used.system) / count)
  }
  results.sort((a, b) => a - b)
  return results[Math.floor(ROUNDS / 2)] as number
}

function run (stage: AuthStage, req: DescribedRequest, state: AuthState): void {
  if (stage.run(req, state) !== undefined) throw new Error(`${stage.name} went asynchronous`)
}

const headersStage = messageSignatureHeadersStage()
const verifyStage = messageSignatureStage()
const seedStage = signatureStage()
const pairs: Array<[string, { publicKey: KeyObject; privateKey: KeyObject }, string[]]> = [
  ['RSA-2048', generateKeyPairSync('rsa', { modulusLength: 2048 }), ['rsa-v1_5-sha256', 'rsa-pss-sha512']],
  ['Ed25519', generateKeyPairSync('ed25519'), ['ed25519']],
  ['P-256', generateKeyPairSync('ec', { namedCurve: 'prime256v1' }), ['ecdsa-p256-sha256']]
]
const line = (label: string, us: number): string => `${label.padEnd(52)} ${us.toFixed(1).padStart(7)} us CPU/request`

for (const [name, pair, algs] of pairs) {
  const apiKey = apiKeyOf(pair.publicKey)
  const key = { apiKey, owner: 'bench', name, keyObject: pair.publicKey }
  const count = name === 'RSA-2048' ? 5000 : 3000
  if (name !== 'P-256') {
    // the seed's scheme: RSA PKCS#1 v1.5, or the key's own algorithm over the same signing string
    const timestamp = String(Date.now())
    const signed = sign(name === 'Ed25519' ? null : 'sha256', Buffer.concat(signingString(timestamp, 'POST', TARGET, BODY)), pair.privateKey)
    const seed = request({ 'x-api-key': apiKey, 'x-api-timestamp': timestamp, 'x-api-signature': signed.toString('base64') })
    const state: AuthState = { key, signatureHeaders: { apiKey, timestamp, signature: signed.toString('base64') } }
    // the seed's signature stage verifies RSA only today (Ed25519 and P-256 in the seed scheme: keys/public-key.ts, another change)
    if (name === 'RSA-2048') console.log(line(`seed X-API-Signature, ${name}`, cpuPerRun(count, () => { run(seedStage, seed, state) })))
  }
  for (const alg of algs) {
    const req = rfc9421Request(pair.privateKey, apiKey, alg)
    console.log(line(`RFC 9421 ${alg}, ${name}: parse + digest + base + verify`, cpuPerRun(count, () => {
      const state: AuthState = { key }
      run(headersStage, req, state)
      state.messageSignature = state.messageSignatures?.[0]
      run(verifyStage, req, state)
    })))
  }
}
const parseOnly = rfc9421Request(pairs[1]?.[1].privateKey as KeyObject, 'a'.repeat(64), 'ed25519')
console.log(line('RFC 9421 Signature-Input + Signature parsing alone', cpuPerRun(50_000, () => { run(headersStage, parseOnly, {}) })))
