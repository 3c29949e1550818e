// A signed agent's key directory is believed only when it is what draft-meunier-http-message-
// signatures-directory says: served as application/http-message-signatures-directory+json, and
// signed (RFC 9421, on the response) by a key it publishes, with tag
// "http-message-signatures-directory", covering "@authority";req (the authority keygate asked,
// so a directory copied to another host does not verify there), within its created and expires.
// One such signature suffices. A JWK Set named directly (Signature-Agent's type jwks_uri) is a
// plain key set: no directory signature is asked of it.
import { serializeComponentId, type MessageSignatureAlgorithm } from '#client/protocol'
import type { SignatureAgent } from '../agents/signature-agent.js'
import { DIRECTORY_MEDIA_TYPE } from '../agents/agent-directories.js'
import { isGatewayError } from '../errors.js'
import type { DocumentCheck } from '../remote-keys/key-set-fetch.js'
import type { PublishedKey } from '../remote-keys/published-keys.js'
import { parseSignatureField, signatureInput } from './message-signature-headers.js'
import { algorithmFor, verifyMessageSignature } from './message-signature.js'

export const DIRECTORY_SIGNATURE_TAG = 'http-message-signatures-directory'
/** how far a directory signature's created may be ahead of keygate's clock */
const CREATED_SKEW_SECONDS = 60

/** The check of `agent`'s fetched directory (undefined for a JWK Set named directly: nothing to check). */
export function directoryCheck (agent: SignatureAgent, now: () => number = Date.now): DocumentCheck | undefined {
  if (agent.type !== 'directory') return undefined
  return ({ url, headers, keys }) => {
    const type = (headers.get('content-type') ?? '').split(';')[0]?.trim().toLowerCase()
    if (type !== DIRECTORY_MEDIA_TYPE) throw new Error(`it is served as ${type === '' ? 'no content type' : type}, not ${DIRECTORY_MEDIA_TYPE}`)
    const inputValue = headers.get('signature-input')
    const signatureValue = headers.get('signature')
    if (inputValue === null || signatureValue === null) throw new Error('it is not signed: no Signature-Input and Signature on the answer')
    const byThumbprint = new Map(keys.map((key) => [key.thumbprint, key]))
    const problems: string[] = []
    try {
      const inputs = parseSignatureField('Signature-Input', inputValue)
      const signatures = parseSignatureField('Signature', signatureValue)
      for (const [label, member] of inputs) {
        if (!Array.isArray(member[0]) || member[1].get('tag') !== DIRECTORY_SIGNATURE_TAG) continue
        const problem = checkOne(label, member, signatures, byThumbprint, url, now)
        if (problem === undefined) return
        problems.push(problem)
      }
    } catch (err) {
      if (!isGatewayError(err)) throw err
      throw new Error(`its signature cannot be read: ${err.message}`)
    }
    if (problems.length === 0) throw new Error(`no signature on it has tag="${DIRECTORY_SIGNATURE_TAG}"`)
    throw new Error(`no signature on it verifies: ${problems.join('; ')}`)
  }
}

type Inputs = ReturnType<typeof parseSignatureField>
type Member = Inputs extends Map<string, infer V> ? V : never

/** Why the directory signature labelled `label` does not hold, or undefined when it does. */
function checkOne (
  label: string, member: Member, signatures: Inputs, keys: ReadonlyMap<string, PublishedKey>, url: URL, now: () => number
): string | undefined {
  if (typeof member[1].get('keyid') !== 'string') return `${label} has no keyid`
  const input = signatureInput(label, member, signatures)
  const key = keys.get(input.keyid)
  if (key === undefined) return `${label}'s keyid ${JSON.stringify(input.keyid)} is the thumbprint of no key the directory publishes`
  const seconds = Math.floor(now() / 1000)
  if (input.created === undefined || input.expires === undefined) return `${label} lacks created or expires`
  if (input.created > seconds + CREATED_SKEW_SECONDS) return `${label} was created in the future`
  if (input.expires <= seconds) return `${label} expired ${seconds - input.expires} s ago`
  const authority = input.components.find((component) => component.name === '@authority')
  if (authority === undefined || !(authority.params ?? []).some(([name, value]) => name === 'req' && value === true) || input.components.length !== 1) {
    return `${label} must cover "@authority";req, and only it`
  }
  let alg: MessageSignatureAlgorithm
  try {
    alg = algorithmFor(key.keyObject, input)
  } catch (err) {
    return `${label}: ${(err as Error).message}`
  }
  const base = `${serializeComponentId(authority)}: ${url.host}\n"@signature-params": ${input.signatureParams}`
  return verifyMessageSignature(key.keyObject, alg, Buffer.from(base), input.signature) ? undefined : `${label} does not verify over ${url.host}`
}
