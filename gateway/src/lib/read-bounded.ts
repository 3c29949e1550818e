// A fetch answer's body read within a bound: what keygate reads of answers from servers someone
// else runs (an IdP's key set, discovery document and token endpoint; an agent's directory).
// Whatever Content-Length says, counting is what holds: a chunked answer says none.

/** The body, read until it ends; undefined once it passes `maxBytes` (the stream is then cancelled: nothing more is read). */
export async function readBounded (response: Response, maxBytes: number): Promise<Uint8Array | undefined> {
  if (response.body === null) return new Uint8Array()
  const reader = response.body.getReader()
  const chunks: Uint8Array[] = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    size += value.byteLength
    if (size > maxBytes) {
      await reader.cancel().catch(() => undefined)
      return undefined
    }
    chunks.push(value)
  }
  return Buffer.concat(chunks)
}
