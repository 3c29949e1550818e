// RFC 9421: the registered key of a request's signature, its `keyid` (the apiKey). Of several
// signatures, the first whose keyid is a registered key; when none is, the first one's refusal
// (the same UNKNOWN_API_KEY answers as X-API-Key's, naming keyid).
import type { KeyCheck, KeyRegistry } from '../keys/key-registry.js'
import { accept } from './api-key.js'
import type { MessageSignatureInput } from './message-signature-headers.js'
import { required, type AuthStage, type AuthState } from './stage.js'

const usable = (found: KeyCheck | null): boolean => found !== null && found.status === 'active'

export function keyIdStage (keys: KeyRegistry, now: () => number = Date.now): AuthStage {
  return {
    name: 'api-key',
    needsBody: false,
    run (_request, state) {
      const candidates = required(state.messageSignatures, 'the RFC 9421 signatures', 'api-key')
      let first: KeyCheck | null = null
      const step = (i: number, found: KeyCheck | null): void | Promise<void> => {
        if (i === 0) first = found
        if (usable(found)) return finish(candidates[i] as MessageSignatureInput, found, state)
        if (i + 1 === candidates.length) return finish(candidates[0] as MessageSignatureInput, first, state)
        return look(i + 1)
      }
      const look = (i: number): void | Promise<void> => {
        const found = keys.check((candidates[i] as MessageSignatureInput).keyid, now())
        // a key this process knows: no promise; else one store read
        return found instanceof Promise ? found.then((key) => step(i, key)) : step(i, found)
      }
      return look(0)
    }
  }
}

function finish (candidate: MessageSignatureInput, found: KeyCheck | null, state: AuthState): void {
  accept(found, state, `keyid ${candidate.keyid} (Signature-Input ${candidate.label})`)
  state.messageSignature = candidate
}
