// The cheap first look at an MCP answer that asked for no list (docs/mcp.md, "Lists show what may
// be called"): a message can hold a list's response only if its text spells one of the list members
// as a key. An honest serializer writes a key literally, so the key "tools" ends in the bytes
// `tools"`; a hostile one can spell it only with `\u` escapes (JSON's other escapes spell no
// letter). The text is judged a possible list when it holds, in any ASCII case, `tools"`,
// `prompts"`, `resources"` or `resourcetemplates"`, or any `\u`; only then is it read (list-filter.ts).
// A value that merely ends in one of those words (`"list the tools"`) is read too, and passes as it came.
import { Transform, type TransformCallback } from 'node:stream'

const NEEDLE = /tools"|prompts"|resources"|resourcetemplates"|\\u/i
/** the longest needle less one byte: what a chunk keeps of the one before, so a needle cut in two is still seen */
const TAIL = 'resourcetemplates"'.length - 1

/** Whether `text` (a string, or bytes read one byte per character) may hold a list's response. */
export function mayHoldList (text: string | Uint8Array): boolean {
  return NEEDLE.test(typeof text === 'string' ? text : Buffer.from(text.buffer, text.byteOffset, text.byteLength).toString('latin1'))
}

/** What a JSON answer is judged by (list-filter.ts: ListFilter.text and the refusal of an answer too large to read). */
export interface JsonJudge {
  text: (bytes: Uint8Array) => Uint8Array | string
  tooLarge: () => Error
}

/**
 * A JSON answer of unknown or large length to a request that asked for no list: held until its
 * end, up to `max` bytes, then judged whole (as it came, rewritten, or refused); past `max` without
 * a possible list, what was held passes and the rest streams, each chunk looked at with the end of
 * the one before: a possible list then cuts the answer (it cannot be read whole any more).
 */
export class JsonAnswerGuard extends Transform {
  readonly #judge: JsonJudge
  readonly #max: number
  #held: Buffer[] = []
  #size = 0
  /** past max: the end of what passed, or undefined while holding */
  #tail: string | undefined

  constructor (judge: JsonJudge, max: number) {
    super()
    this.#judge = judge
    this.#max = max
  }

  override _transform (chunk: Buffer, _encoding: BufferEncoding, done: TransformCallback): void {
    if (this.#tail !== undefined) {
      const text = this.#tail + chunk.toString('latin1')
      if (mayHoldList(text)) { done(this.#judge.tooLarge()); return }
      this.#tail = text.slice(-TAIL)
      done(null, chunk)
      return
    }
    this.#held.push(chunk)
    if ((this.#size += chunk.length) <= this.#max) { done(); return }
    const body = Buffer.concat(this.#held)
    this.#held = []
    if (mayHoldList(body)) { done(this.#judge.tooLarge()); return }
    this.#tail = body.subarray(-TAIL).toString('latin1')
    done(null, body)
  }

  override _flush (done: TransformCallback): void {
    if (this.#tail !== undefined) { done(); return }
    try {
      const text = this.#judge.text(Buffer.concat(this.#held))
      done(null, typeof text === 'string' ? Buffer.from(text) : text)
    } catch (err) {
      done(err instanceof Error ? err : new Error(String(err)))
    }
  }
}
