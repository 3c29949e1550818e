// Web Bot Auth: where a signed agent's keys are, as its Signature-Agent header says. Two forms:
// - the current one (draft-ietf-webbotauth-httpsig-protocol): a Structured Fields dictionary
//   keyed by the signature's label, each member a string, with an optional `type`: `directory`
//   (the default; an HTTPS origin whose key directory is at
//   /.well-known/http-message-signatures-directory) or `jwks_uri` (an HTTPS URL of a JWK Set);
//   `Signature-Agent: sig1="https://agent.example";type=directory`;
// - the earlier one (draft-meunier-web-bot-auth-architecture): one quoted URI, an origin whose
//   directory is at the well-known path: `Signature-Agent: "https://agent.example"`.
// HTTPS only: a directory keygate would fetch over plain HTTP proves nothing. Parsed with the
// maintained Structured Fields parser (RFC 9651) keygate reads Signature-Input with.
import { parseDictionary, parseItem, Token } from 'structured-headers'

/** draft-meunier-http-message-signatures-directory: where an origin publishes its signing keys */
export const DIRECTORY_PATH = '/.well-known/http-message-signatures-directory'
/** the longest Signature-Agent value read; a longer one is refused before it is parsed */
export const MAX_SIGNATURE_AGENT_LENGTH = 2048
/** the longest URL a member may name */
const MAX_URL_LENGTH = 1024

export type SignatureAgentType = 'directory' | 'jwks_uri'

/**
 * Why `value` is not an agent's identity as an operator names it (a route's `agents`, the agents
 * file), or undefined: exactly the origin keygate derives from a Signature-Agent, https://host[:port].
 */
export function agentOriginProblem (value: string): string | undefined {
  let url: URL | undefined
  try { url = new URL(value) } catch {}
  return url?.protocol === 'https:' && url.origin === value
    ? undefined
    : `${JSON.stringify(value)} is not an origin as https://host[:port] (lower case, no path, no trailing /)`
}

/** Where one signature's keys are published. */
export interface SignatureAgent {
  /** the Signature-Agent form: the dictionary member of this label, or the earlier single URI */
  form: 'dictionary' | 'legacy'
  type: SignatureAgentType
  /** the agent's identity: the origin of the directory (or of the JWKS URL), as https://host[:port] */
  origin: string
  /** what keygate fetches: the origin's well-known directory, or the JWKS URL as given */
  url: string
}

/** Why a Signature-Agent value cannot be used, in words the agent's developer can act on. */
export class SignatureAgentError extends Error {
  override name = 'SignatureAgentError'
}

function httpsUrl (value: string, type: SignatureAgentType): URL {
  if (value.length > MAX_URL_LENGTH) throw new SignatureAgentError(`the URL is ${value.length} characters; at most ${MAX_URL_LENGTH}`)
  let url: URL
  try {
    url = new URL(value)
  } catch {
    throw new SignatureAgentError(`${JSON.stringify(value)} is not a URL`)
  }
  if (url.protocol !== 'https:') throw new SignatureAgentError(`${JSON.stringify(value)} is not https: keygate fetches key directories over HTTPS only`)
  if (url.username !== '' || url.password !== '') throw new SignatureAgentError(`${JSON.stringify(value)} carries credentials`)
  if (url.hash !== '') throw new SignatureAgentError(`${JSON.stringify(value)} has a fragment`)
  if (type === 'directory' && ((url.pathname !== '/' && url.pathname !== DIRECTORY_PATH) || url.search !== '')) {
    throw new SignatureAgentError(`${JSON.stringify(value)}: a directory is named by its origin (https://host), its keys at ${DIRECTORY_PATH}`)
  }
  return url
}

function agentOf (value: string, type: SignatureAgentType, form: SignatureAgent['form']): SignatureAgent {
  const url = httpsUrl(value, type)
  return { form, type, origin: url.origin, url: type === 'directory' ? `${url.origin}${DIRECTORY_PATH}` : url.href }
}

/**
 * The agent that signed the signature labelled `label`, from the request's Signature-Agent value:
 * its dictionary member of that label, or the earlier form's one URI. Throws SignatureAgentError.
 */
export function signatureAgentOf (header: string, label: string): SignatureAgent {
  if (header.length > MAX_SIGNATURE_AGENT_LENGTH) {
    throw new SignatureAgentError(`Signature-Agent is ${header.length} characters; at most ${MAX_SIGNATURE_AGENT_LENGTH}`)
  }
  let dictionary: ReturnType<typeof parseDictionary> | undefined
  try {
    dictionary = parseDictionary(header)
  } catch {
    dictionary = undefined
  }
  if (dictionary !== undefined && dictionary.size > 0) {
    const member = dictionary.get(label)
    if (member === undefined) {
      throw new SignatureAgentError(`Signature-Agent has no member ${label}, the signature's label (it has ${[...dictionary.keys()].join(', ')})`)
    }
    const [value, params] = member
    if (typeof value !== 'string') throw new SignatureAgentError(`Signature-Agent's member ${label} must be a string: ${label}="https://..."`)
    // a token (type=jwks_uri) or a string (type="jwks_uri")
    const raw = params.get('type')
    const type = raw === undefined ? 'directory' : raw instanceof Token || typeof raw === 'string' ? raw.toString() : ''
    if (type !== 'directory' && type !== 'jwks_uri') {
      throw new SignatureAgentError(`Signature-Agent's member ${label} has the type ${type === '' ? String(raw) : type}; keygate takes directory and jwks_uri`)
    }
    return agentOf(value, type, 'dictionary')
  }
  let item: ReturnType<typeof parseItem>
  try {
    item = parseItem(header)
  } catch (err) {
    throw new SignatureAgentError(`Signature-Agent is neither a Structured Fields dictionary (label="https://...") nor a quoted URI: ${(err as Error).message}`)
  }
  if (typeof item[0] !== 'string') throw new SignatureAgentError('Signature-Agent must be label="https://..." or a quoted URI')
  return agentOf(item[0], 'directory', 'legacy')
}
