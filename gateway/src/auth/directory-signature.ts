// A signed agent's key directory is believed only when it is what draft-meunier-http-message-
// signatures-directory says: served as application/http-message-signatures-directory+json, and
// signed (RFC 9421, on the response) by a key it publishes, with tag
// "http-message-signatures-directory", within its created and expires, covering "@authority";req
// (the authority keygate asked, so a directory copied to another host does not verify there).
// It may cover more, as the Web Bot Auth draft's possession proof does ("@authority";req
// "content-digest"): content-digest is checked against the exact bytes received (sha-256 or
// sha-512, content-digest.ts), and any other field of the answer is taken as received. A
// component keygate cannot verify on an answer (another derived one, a parameter) refuses that
// signature, naming the component. One such signature suffices. A JWK Set named directly
// (Signature-Agent's type jwks_uri) is a plain key set: no directory signature is asked of it.
import { serializeComponentId, signatureBase, type ComponentId, type MessageSignatureAlgorithm } from '#client/protocol'
import type { SignatureAgent } from '../agents/signature-agent.js'
import { DIRECTORY_MEDIA_TYPE } from '../agents/agent-directories.js'
import { isGatewayError } from '../errors.js'
import { mediaTypeOf } from '../lib/http-headers.js'
import type { DocumentCheck } from '../remote-keys/key-set-fetch.js'
import type { PublishedKey } from '../remote-keys/published-keys.js'
import { checkContentDigest } from './content-digest.js'
import { parseSignatureField, signatureInput } from './message-signature-headers.js'
import { algorithmFor, verifyMessageSignature } from './message-signature.js'

export const DIRECTORY_SIGNATURE_TAG = 'http-message-signatures-directory'
/** how far a directory signature's created may be ahead of keygate's clock */
const CREATED_SKEW_SECONDS = 60

/** The check of `agent`'s fetched directory (undefined for a JWK Set named directly: nothing to check). */
export function directoryCheck (agent: SignatureAgent, now: () => number = Date.now): DocumentCheck | undefined {
  if (agent.type !== 'directory') return undefined
  return ({ url, headers, keys, body }) => {
    const type = mediaTypeOf(headers.get('content-type') ?? undefined)
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
        const problem = checkOne(label, member, signatures, byThumbprint, { url, headers, body }, now)
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

/** the answer a directory signature is checked against: the URL asked, the answer's fields and its exact bytes */
interface Answer { url: URL; headers: Headers; body: Uint8Array }

const REQUEST_AUTHORITY = '"@authority";req'

/** A covered component's value on `answer`; throws an Error saying why keygate cannot verify it. */
function componentValue (component: ComponentId, answer: Answer): string {
  const id = serializeComponentId(component)
  if (id === REQUEST_AUTHORITY) return answer.url.host
  if (component.name.startsWith('@') || (component.params ?? []).length > 0) {
    throw new Error(`covers ${id}, which keygate cannot verify on a directory's answer (it verifies ${REQUEST_AUTHORITY}, content-digest and plain fields)`)
  }
  const value = answer.headers.get(component.name)
  if (value === null) throw new Error(`covers ${id}, which the answer does not have`)
  if (component.name === 'content-digest') {
    try {
      checkContentDigest(value, answer.body)
    } catch (err) {
      throw new Error(`covers ${id}, which does not match the ${answer.body.length} bytes received: ${(err as Error).message}`, { cause: err })
    }
  }
  return value
}

/** Why the directory signature labelled `label` does not hold, or undefined when it does. */
function checkOne (
  label: string, member: Member, signatures: Inputs, keys: ReadonlyMap<string, PublishedKey>, answer: Answer, now: () => number
): string | undefined {
  if (typeof member[1].get('keyid') !== 'string') return `${label} has no keyid`
  const input = signatureInput(label, member, signatures)
  const key = keys.get(input.keyid)
  if (key === undefined) return `${label}'s keyid ${JSON.stringify(input.keyid)} is the thumbprint of no key the directory publishes`
  const seconds = Math.floor(now() / 1000)
  if (input.created === undefined || input.expires === undefined) return `${label} lacks created or expires`
  if (input.created > seconds + CREATED_SKEW_SECONDS) return `${label} was created in the future`
  if (input.expires <= seconds) return `${label} expired ${seconds - input.expires} s ago`
  if (!input.components.some((component) => serializeComponentId(component) === REQUEST_AUTHORITY)) {
    return `${label} must cover ${REQUEST_AUTHORITY} (the authority keygate asked)`
  }
  let alg: MessageSignatureAlgorithm
  let base: string
  try {
    alg = algorithmFor(key.keyObject, input)
    base = signatureBase(input.components.map((component) => [component, componentValue(component, answer)] as const), input.signatureParams)
  } catch (err) {
    return `${label}: ${(err as Error).message}`
  }
  return verifyMessageSignature(key.keyObject, alg, Buffer.from(base), input.signature) ? undefined : `${label} does not verify over ${answer.url.host}`
}
