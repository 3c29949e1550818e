// Rotations under way in this page: a new key made to replace an old one, and whether a request
// signed with the new key has worked yet (then the page offers to revoke the old key). In memory,
// as the session is: after a reload, revoke the old key from its own page.
export interface Rotation { oldApiKey: string; oldName: string; tried: boolean }

const rotations = new Map<string, Rotation>()

export function startRotation (newApiKey: string, oldApiKey: string, oldName: string): void {
  rotations.set(newApiKey, { oldApiKey, oldName, tried: false })
}

/** A request signed with `apiKey` was answered 2xx. */
export function markTried (apiKey: string): void {
  const rotation = rotations.get(apiKey)
  if (rotation !== undefined) rotation.tried = true
}

export function rotationOf (apiKey: string): Rotation | undefined {
  return rotations.get(apiKey)
}

export function endRotation (apiKey: string): void {
  rotations.delete(apiKey)
}
