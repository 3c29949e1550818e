// Signed agents (Web Bot Auth, draft-ietf-webbotauth-httpsig-protocol): a request whose RFC 9421
// signature is tagged "web-bot-auth" and verifies with a key from the directory its
// Signature-Agent names is from that agent. Checked no looser than Cloudflare's reference
// verifier (web-bot-auth, after GHSA-x9cc-346q-g27m):
// - the signature's keyid is the JWK thumbprint (RFC 7638) of a key its directory publishes;
// - created and expires are both required, expires in the future, created not ahead of keygate's
//   clock (a minute of skew), and expires - created at most MAX_AGENT_SIGNATURE_SECONDS;
// - it covers @authority (or @target-uri), and signature-agent (the field, or its member of this
//   signature's label) whenever the request has that header; content-digest when it has a body
//   (which keygate checks against the bytes, as for any signed request);
// - it is good for one request: the agent's nonce when it sends one, else the signature base,
//   remembered across gateways (the store's replay marks) until the signature expires.
// The drafts do not ask an agent to sign the method and path; one use per signature is what keeps
// a signature over the authority alone from being spent on another request.
import { createHash } from 'node:crypto'
import { serializeItem, type Item } from 'structured-headers'
import { ComponentError, requestComponentValue, signatureBase, type ComponentId, type SignedMessage } from '#client/protocol'
import type { AgentDirectories } from '../agents/agent-directories.js'
import { signatureAgentOf, SignatureAgentError, type SignatureAgent } from '../agents/signature-agent.js'
import { GatewayError, isGatewayError } from '../errors.js'
import type { Store } from '../store/index.js'
import { checkContentDigest } from './content-digest.js'
import { bodyBytes, hasBody, UNSEEN_BODY, type DescribedRequest } from './described-request.js'
import { parseSignatureField, signatureInput } from './message-signature-headers.js'
import { algorithmFor, signedMessage, signatureLength, verifyMessageSignature } from './message-signature.js'
// a replay mark outlives the signature's expiry by the replay guard's margin: gateways' clocks differ a little
import { CLOCK_MARGIN_MS } from './replay.js'
import { required, type AgentAllowance, type AuthStage, type AuthState, type MessageSignatureInput } from './stage.js'

export type { AgentAllowance, AgentSignatureState, VerifiedAgent } from './stage.js'

export const AGENT_SIGNATURE_TAG = 'web-bot-auth'
/** the longest span from created to expires an agent's signature may have */
export const MAX_AGENT_SIGNATURE_SECONDS = 3600
const CREATED_SKEW_SECONDS = 60

const invalid = (detail: string, extra: Record<string, unknown> = {}): GatewayError =>
  new GatewayError('INVALID_AGENT_SIGNATURE', detail, { extra })

function field (request: DescribedRequest, name: string): string | undefined {
  const lines = request.field(name)
  return lines === undefined ? undefined : lines.join(', ')
}

/** The first signature of Signature-Input tagged web-bot-auth, checked for form and time. */
function chooseSignature (request: DescribedRequest, now: number): MessageSignatureInput {
  const inputValue = field(request, 'signature-input')
  const signatureValue = field(request, 'signature')
  if (inputValue === undefined || signatureValue === undefined) {
    throw new GatewayError('MISSING_AGENT_SIGNATURE', 'This route takes signed agents: send an RFC 9421 signature tagged ' +
      `"${AGENT_SIGNATURE_TAG}" in Signature-Input and Signature, with the Signature-Agent header naming your key directory`)
  }
  let input: MessageSignatureInput | undefined
  try {
    const inputs = parseSignatureField('Signature-Input', inputValue)
    const signatures = parseSignatureField('Signature', signatureValue)
    for (const [label, member] of inputs) {
      if (!Array.isArray(member[0]) || member[1].get('tag') !== AGENT_SIGNATURE_TAG) continue
      if (typeof member[1].get('keyid') !== 'string') throw invalid(`Signature-Input ${label} has no keyid: the JWK thumbprint (RFC 7638) of your key`)
      input = signatureInput(label, member, signatures)
      break
    }
  } catch (err) {
    if (isGatewayError(err) && err.code === 'INVALID_SIGNATURE') throw invalid(err.message, err.extra ?? {})
    throw err
  }
  if (input === undefined) {
    throw new GatewayError('MISSING_AGENT_SIGNATURE', `No signature in Signature-Input is tagged "${AGENT_SIGNATURE_TAG}": ` +
      'this route takes signed agents (Web Bot Auth)')
  }
  const { label, created, expires } = input
  const seconds = Math.floor(now / 1000)
  if (created === undefined || expires === undefined) throw invalid(`Signature-Input ${label} must carry both created and expires`, { label })
  if (created > seconds + CREATED_SKEW_SECONDS) {
    throw invalid(`Signature-Input ${label} was created ${created - seconds} s in the future`, { label, serverTime: now })
  }
  if (expires <= seconds) throw invalid(`Signature-Input ${label} expired ${seconds - expires} s ago`, { label, serverTime: now })
  if (expires - created > MAX_AGENT_SIGNATURE_SECONDS) {
    throw invalid(`Signature-Input ${label} spans ${expires - created} s from created to expires; at most ${MAX_AGENT_SIGNATURE_SECONDS}`, { label })
  }
  return input
}

/** The components an agent's signature must cover, those it lacks. */
function missingComponents (input: MessageSignatureInput, hasAgentHeader: boolean, hasRequestBody: boolean): string[] {
  const covered = new Set(input.components.map((component) => component.name))
  const missing: string[] = []
  if (!covered.has('@authority') && !covered.has('@target-uri')) missing.push('@authority (or @target-uri)')
  if (hasAgentHeader && !covered.has('signature-agent')) missing.push('signature-agent')
  if (hasRequestBody && !covered.has('content-digest')) missing.push('content-digest')
  return missing
}

/**
 * The agent's signature and its agent (before the body): the signature tagged web-bot-auth, its
 * times, the components it covers, its Signature-Agent, and whether the route lets that agent in
 * (before anything is fetched).
 */
export function agentSignatureHeadersStage (allowance: (state: { agents?: AgentAllowance }) => AgentAllowance, now: () => number = Date.now): AuthStage {
  return {
    name: 'agent-signature-headers',
    needsBody: false,
    run (request, state) {
      const input = chooseSignature(request, now())
      const header = field(request, 'signature-agent')
      const missing = missingComponents(input, header !== undefined, hasBody(request))
      // a member covered (RFC 9421 §2.1.2) is this signature's: the one keygate takes its directory from
      const member = input.components.find((component) => component.name === 'signature-agent')?.params?.find(([name]) => name === 'key')?.[1]
      if (member !== undefined && member !== input.label) {
        throw invalid(`Signature-Input ${input.label} covers Signature-Agent's member ${String(member)}, not its own (${input.label})`, { label: input.label })
      }
      if (missing.length > 0) {
        throw invalid(`Signature-Input ${input.label} must cover ${missing.join(', ')}: a signature over less could be spent on another request`,
          { label: input.label, missingComponents: missing })
      }
      let agent: SignatureAgent | undefined
      if (header !== undefined) {
        try {
          agent = signatureAgentOf(header, input.label)
        } catch (err) {
          if (err instanceof SignatureAgentError) throw invalid(`Signature-Agent: ${err.message}`, { label: input.label })
          throw err
        }
      }
      const allowed = allowance(state)
      if (allowed !== 'any' && (agent === undefined || !allowed.has(agent.origin))) {
        throw new GatewayError('AGENT_NOT_ALLOWED', agent === undefined
          ? 'This route lets in named agents only: send Signature-Agent naming your directory'
          : `This route does not let in the agent of ${agent.origin}`, { extra: { ...(agent !== undefined && { agent: agent.origin }) } })
      }
      if (agent === undefined) {
        throw invalid('The request has no Signature-Agent header: name the origin of your key directory (Signature-Agent: ' +
          `${input.label}="https://your-agent.example")`, { label: input.label })
      }
      state.agentSignature = { input, agent, routeNamesAgent: allowed !== 'any' }
    }
  }
}

/** The agent's key, from its directory (held, or fetched within the directories' bounds). */
export function agentKeyStage (directories: AgentDirectories): AuthStage {
  return {
    name: 'agent-key',
    needsBody: false,
    run (_request, state) {
      const signature = required(state.agentSignature, 'the agent\'s signature', 'agent-key')
      const agent = required(signature.agent, 'the agent', 'agent-key')
      const found = directories.keyFor(agent, signature.input.keyid, signature.routeNamesAgent)
      if (found instanceof Promise) return found.then((key) => { signature.key = key })
      signature.key = found
    }
  }
}

/** A component's value: RFC 9421 §2.1.2's dictionary member (`;key`) of Signature-Agent, else as any signed request's. */
function componentValue (request: DescribedRequest, message: SignedMessage, component: ComponentId): string {
  const key = component.params?.find(([name]) => name === 'key')?.[1]
  if (component.name !== 'signature-agent' || key === undefined) return requestComponentValue(message, component)
  if (typeof key !== 'string' || component.params?.length !== 1) throw new ComponentError('"signature-agent"', 'takes ;key="<label>" alone')
  const member = parseSignatureField('Signature-Agent', field(request, 'signature-agent') ?? '').get(key)
  if (member === undefined) throw new ComponentError(`"signature-agent";key="${key}"`, `Signature-Agent has no member ${key}`)
  return serializeItem(member as Item)
}

/**
 * The agent's signature verified with its key (after the body: a body's Content-Digest is checked
 * against it), then made good for one request only. `onFailure` hears of each signature that did
 * not verify (the budget of failed signature checks per address).
 */
export function agentVerificationStage (
  store: Store, now: () => number = Date.now, onFailure?: (request: DescribedRequest, state: AuthState) => void
): AuthStage {
  return {
    name: 'agent-signature',
    needsBody: true,
    run (request, state) {
      const signature = required(state.agentSignature, 'the agent\'s signature', 'agent-signature')
      const { input } = signature
      const { agent, key } = required(signature.key, 'the agent\'s key', 'agent-signature')
      if (request.body === UNSEEN_BODY) throw new GatewayError('UNSEEN_BODY', 'An agent\'s request with a body must be shown to keygate')
      const digest = request.field('content-digest')
      if (digest !== undefined) checkContentDigest(digest.join(', '), bodyBytes(request))
      let base: string
      try {
        const message = signedMessage(request)
        base = signatureBase(input.components.map((component) => [component, componentValue(request, message, component)] as const), input.signatureParams)
      } catch (err) {
        if (!(err instanceof ComponentError)) throw err
        throw invalid(`Signature-Input ${input.label} covers ${err.component}, which cannot be verified: ${err.message}`, { label: input.label })
      }
      const alg = (() => {
        try {
          return algorithmFor(key.keyObject, input)
        } catch (err) {
          throw invalid((err as Error).message, { label: input.label })
        }
      })()
      const verified = input.signature.length === signatureLength(key.keyObject, alg) &&
        verifyMessageSignature(key.keyObject, alg, Buffer.from(base), input.signature)
      const baseSha256 = createHash('sha256').update(base).digest('hex')
      if (!verified) {
        onFailure?.(request, state)
        throw invalid(`The signature does not verify with the key ${input.keyid} of ${agent.origin} over the signature base described here`, {
          label: input.label, keyid: input.keyid, agent: agent.origin, signatureBaseSha256: baseSha256, signatureBase: base.split('\n')
        })
      }
      state.agent = { origin: agent.origin, thumbprint: key.thumbprint, pinned: signature.key?.pinned ?? false }
      // one request per signature: by its nonce when it has one, else by its base
      const id = createHash('sha256').update(agent.origin).update('\n')
        .update(input.nonce !== undefined ? `nonce:${input.nonce}` : `base:${baseSha256}`).digest('hex')
      const ttlMs = (input.expires as number) * 1000 + CLOCK_MARGIN_MS - now()
      return store.rememberOnce(`agent-replay:${id}`, Math.max(ttlMs, 1)).then((mark) => {
        if (mark === false) {
          throw new GatewayError('REPLAYED_REQUEST', 'This agent signature was already accepted: sign each request anew ' +
            '(a new nonce, or a new created, makes a new signature)')
        }
        state.agentReplayMark = mark
      })
    }
  }
}
