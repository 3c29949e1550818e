// The token-signing key ring in one process: the current key and the previous ones until they retire.
import type { SigningKeyRing, SigningKeyStore } from '../types.js'

export function memorySigningKeys (now: () => number): SigningKeyStore {
  let signingKey: string | undefined
  /** previous signing keys (PEM) and the ms at which each retires */
  const previousSigningKeys = new Map<string, number>()
  const signingKeyRing = (): SigningKeyRing | null => {
    if (signingKey === undefined) return null
    const t = now()
    for (const [pem, retiresAt] of previousSigningKeys) if (retiresAt <= t) previousSigningKeys.delete(pem)
    const previous = [...previousSigningKeys].map(([pem, retiresAt]) => ({ pem, retiresAt })).sort((a, b) => a.retiresAt - b.retiresAt)
    return { current: signingKey, previous }
  }
  return {
    async getOrCreateSigningKey (candidate) {
      signingKey ??= candidate
      return signingKey
    },
    async getSigningKeyRing () {
      return signingKeyRing()
    },
    async rotateSigningKey (candidate, retireAfterMs) {
      const retiresAt = now() + retireAfterMs
      const replaced = signingKey !== undefined && signingKey !== candidate ? { pem: signingKey, retiresAt } : null
      if (replaced !== null) previousSigningKeys.set(replaced.pem, retiresAt)
      previousSigningKeys.delete(candidate)
      signingKey = candidate
      return { ...signingKeyRing() as SigningKeyRing, replaced }
    }
  }
}
