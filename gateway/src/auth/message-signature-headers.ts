// RFC 9421: the Signature-Input and Signature fields of a request, parsed with a maintained
// Structured Fields parser (RFC 9651, structured-headers), into the signatures the gateway may
// verify. Which one is verified: the one the route names (its signatureLabel), else the first whose
// keyid is a registered key (key-id.ts). Nothing here is verified yet; only the form is checked.
import { parseDictionary, Token, type BareItem, type Parameters as SfParameters } from 'structured-headers'
import { API_KEY_PATTERN, repeatedComponent, serializeSignatureParams, type ComponentId, type Parameters, type ParameterValue } from '#client/protocol'
import { GatewayError } from '../errors.js'
import type { AuthStage, MessageSignatureInput } from './stage.js'

export type { MessageSignatureInput } from './stage.js'

/** Signatures whose keyid is looked up, at most: each unknown one may cost a store read. */
const MAX_CANDIDATES = 4

const MESSAGE_SIGNATURE_HEADERS = ['signature-input', 'signature'] as const

function invalid (detail: string, extra: Record<string, unknown> = {}): GatewayError {
  return new GatewayError('INVALID_SIGNATURE', detail, { extra })
}

function fieldValue (value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value
}

export function parseSignatureField (field: string, value: string): ReturnType<typeof parseDictionary> {
  try {
    return parseDictionary(value)
  } catch (err) {
    throw invalid(`${field} is not a Structured Fields dictionary (RFC 9651): ${(err as Error).message}`)
  }
}

function parameterValue (where: string, name: string, value: BareItem): ParameterValue {
  if (typeof value === 'string' || typeof value === 'boolean' || (typeof value === 'number' && Number.isInteger(value))) return value
  const what = value instanceof Token ? 'a token' : typeof value === 'number' ? 'a decimal' : 'not a string, integer or boolean'
  throw invalid(`${where}: the parameter ${name} is ${what}, which keygate does not take`)
}

function parameters (where: string, params: SfParameters): Parameters {
  return [...params].map(([name, value]) => [name, parameterValue(where, name, value)] as const)
}

const stringParam = (params: Parameters, name: string): string | undefined => {
  const value = params.find(([key]) => key === name)?.[1]
  return typeof value === 'string' ? value : undefined
}
const integerParam = (params: Parameters, name: string): number | undefined => {
  const value = params.find(([key]) => key === name)?.[1]
  return typeof value === 'number' ? value : undefined
}

/** One member of Signature-Input with its Signature, checked for form. */
type Dictionary = ReturnType<typeof parseDictionary>
type Member = Dictionary extends Map<string, infer V> ? V : never

export function signatureInput (label: string, member: Member, signatures: Dictionary): MessageSignatureInput {
  const where = `Signature-Input ${label}`
  const [items, memberParams] = member
  if (!Array.isArray(items)) throw invalid(`${where} must be an inner list of covered components: ("@method" "@path" ...);created=...;keyid="..."`)
  const components = items.map(([name, params]): ComponentId => {
    if (typeof name !== 'string') throw invalid(`${where}: each covered component is a string, such as "@method" or "content-digest"`)
    return { name, params: parameters(`${where} "${name}"`, params) }
  })
  // each identifier once (RFC 9421 §2): refused before any key is looked up or anything verified
  const repeated = repeatedComponent(components)
  if (repeated !== undefined) {
    throw invalid(`${where} lists the covered component ${repeated} twice; RFC 9421 allows each once`, { label, repeatedComponent: repeated })
  }
  const params = parameters(where, memberParams)
  for (const name of ['keyid', 'alg', 'nonce', 'tag']) {
    if (memberParams.has(name) && typeof memberParams.get(name) !== 'string') throw invalid(`${where}: ${name} must be a string`)
  }
  for (const name of ['created', 'expires']) {
    if (memberParams.has(name) && !Number.isInteger(memberParams.get(name))) throw invalid(`${where}: ${name} must be an integer (seconds since the epoch)`)
  }
  const keyid = stringParam(params, 'keyid')
  if (keyid === undefined) throw invalid(`${where} has no keyid; send keyid="<apiKey>", the apiKey that POST /v1/api-keys returned`, { label })
  const signature = signatures.get(label)
  if (signature === undefined) throw invalid(`Signature has no member ${label}, which Signature-Input names`, { label })
  const [bytes] = signature
  if (!(bytes instanceof ArrayBuffer)) throw invalid(`Signature ${label} must be a byte sequence: ${label}=:<base64>:`, { label })
  return {
    label,
    components,
    params,
    signatureParams: serializeSignatureParams(components, params),
    keyid,
    alg: stringParam(params, 'alg'),
    created: integerParam(params, 'created'),
    expires: integerParam(params, 'expires'),
    nonce: stringParam(params, 'nonce'),
    signature: Buffer.from(bytes)
  }
}

/**
 * Signature-Input and Signature: each present. The signatures that may be verified, in order:
 * the one labelled `label` when given; else the first four whose keyid looks like an apiKey.
 */
export function messageSignatureHeadersStage (): AuthStage {
  return {
    name: 'signature-headers',
    needsBody: false,
    run (request, state) {
      const values = MESSAGE_SIGNATURE_HEADERS.map((name) => fieldValue(request.headers[name]))
      const missing = MESSAGE_SIGNATURE_HEADERS.filter((_, i) => values[i] === undefined || values[i] === '')
      if (missing.length > 0) {
        throw new GatewayError(
          'MISSING_SIGNATURE_HEADERS',
          `This route takes RFC 9421 signatures: send the Signature-Input and Signature headers; missing: ${missing.join(', ')}`,
          { extra: { missing } }
        )
      }
      const inputs = parseSignatureField('Signature-Input', values[0] as string)
      const signatures = parseSignatureField('Signature', values[1] as string)
      const label = state.signatureLabel
      if (label !== undefined) {
        const member = inputs.get(label)
        if (member === undefined) {
          throw invalid(`This route verifies the signature labelled ${label}; Signature-Input has ${[...inputs.keys()].join(', ') || 'none'}`, { label })
        }
        state.messageSignatures = [signatureInput(label, member, signatures)]
        return
      }
      const candidates: MessageSignatureInput[] = []
      for (const [name, member] of inputs) {
        const keyid = Array.isArray(member[0]) ? member[1].get('keyid') : undefined
        if (typeof keyid === 'string' && API_KEY_PATTERN.test(keyid)) candidates.push(signatureInput(name, member, signatures))
        if (candidates.length === MAX_CANDIDATES) break
      }
      if (candidates.length === 0) {
        throw new GatewayError('UNKNOWN_API_KEY', 'No signature in Signature-Input has a keyid that is an apiKey; ' +
          'send keyid="<apiKey>", the apiKey that POST /v1/api-keys returned')
      }
      state.messageSignatures = candidates
    }
  }
}
