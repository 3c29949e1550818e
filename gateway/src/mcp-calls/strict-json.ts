// A strict JSON reader for MCP messages: RFC 8259 and nothing more, read once. JSON.parse keeps
// the last of two equal keys, and other readers (Go's, Python's, many frameworks') keep the first
// or match keys case-insensitively, so one body could mean one tool to keygate and another to the
// upstream. Here a body is refused unless it has exactly one reading: no duplicate key at any depth
// (compared after escapes are decoded: "na\u006de" is "name"), valid UTF-8, no byte order mark,
// nothing after the value, a bounded depth. Objects have no prototype, so "__proto__" is a key.

export class StrictJsonError extends Error {
  override name = 'StrictJsonError'
  /** where reading stopped: a character offset in the decoded text */
  readonly offset: number
  constructor (message: string, offset: number) {
    super(`${message} at offset ${offset}`)
    this.offset = offset
  }
}

/** deeper nesting is refused: a reader's stack is no place for an attacker's recursion */
export const MAX_JSON_DEPTH = 64

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject
export interface JsonObject { [key: string]: JsonValue }

/** A JSON object: not an array, not null. */
export function isObject (value: JsonValue | undefined): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true })

/** The one value `bytes` holds, or StrictJsonError saying why there is not exactly one. */
export function parseStrictJson (bytes: Uint8Array): JsonValue {
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) {
    throw new StrictJsonError('a byte order mark before the JSON (RFC 8259 forbids one)', 0)
  }
  let text: string
  try {
    text = utf8.decode(bytes)
  } catch {
    throw new StrictJsonError('bytes that are not UTF-8', 0)
  }
  const reader = new Reader(text)
  reader.space()
  const value = reader.value(0)
  reader.space()
  if (reader.at < text.length) reader.fail('more after the JSON value')
  return value
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y
const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' }

class Reader {
  at = 0
  readonly text: string
  constructor (text: string) { this.text = text }

  fail (what: string): never { throw new StrictJsonError(what, this.at) }

  space (): void {
    const text = this.text
    while (this.at < text.length) {
      const c = text.charCodeAt(this.at)
      // RFC 8259's whitespace only: space, tab, LF, CR
      if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) return
      this.at++
    }
  }

  value (depth: number): JsonValue {
    if (depth > MAX_JSON_DEPTH) this.fail(`nesting deeper than ${MAX_JSON_DEPTH}`)
    const c = this.text[this.at]
    switch (c) {
      case '{': return this.object(depth)
      case '[': return this.array(depth)
      case '"': return this.string()
      case 't': return this.word('true', true)
      case 'f': return this.word('false', false)
      case 'n': return this.word('null', null)
      default: return this.number()
    }
  }

  word<T> (word: string, value: T): T {
    if (!this.text.startsWith(word, this.at)) this.fail('an unexpected character')
    this.at += word.length
    return value
  }

  number (): number {
    NUMBER.lastIndex = this.at
    const match = NUMBER.exec(this.text)
    if (match === null) this.fail(this.at >= this.text.length ? 'the end where a value was expected' : 'an unexpected character')
    this.at += match[0].length
    return Number(match[0])
  }

  string (): string {
    const text = this.text
    let out = ''
    let from = ++this.at
    for (;;) {
      if (this.at >= text.length) this.fail('a string that does not end')
      const c = text.charCodeAt(this.at)
      if (c === 0x22) break
      if (c < 0x20) this.fail('a control character in a string')
      if (c !== 0x5c) {
        this.at++
        continue
      }
      out += text.slice(from, this.at)
      const e = text[this.at + 1] ?? ''
      if (e === 'u') {
        const hex = text.slice(this.at + 2, this.at + 6)
        if (!/^[0-9a-fA-F]{4}$/.test(hex)) this.fail('a \\u escape without four hex digits')
        const unit = parseInt(hex, 16)
        out += String.fromCharCode(unit)
        this.at += 6
        if (unit >= 0xd800 && unit <= 0xdfff) out += this.lowSurrogate(unit)
      } else {
        const escaped = ESCAPES[e]
        if (escaped === undefined) this.fail('an unknown escape')
        out += escaped
        this.at += 2
      }
      from = this.at
    }
    out += text.slice(from, this.at)
    this.at++
    return out
  }

  /**
   * After a \\u escape of a surrogate: the low half that must follow a high one, escaped too. A lone
   * half (RFC 8259 §8.2: its reading is unpredictable) is refused: one reader keeps it, another
   * makes it U+FFFD, another drops it, so "delete\\ud800" could name two tools.
   */
  lowSurrogate (unit: number): string {
    const text = this.text
    const hex = text.slice(this.at + 2, this.at + 6)
    const low = text[this.at] === '\\' && text[this.at + 1] === 'u' && /^[0-9a-fA-F]{4}$/.test(hex) ? parseInt(hex, 16) : -1
    if (unit >= 0xdc00 || low < 0xdc00 || low > 0xdfff) { this.at -= 6; this.fail('a \\u escape of half a surrogate pair, alone') }
    this.at += 6
    return String.fromCharCode(low)
  }

  array (depth: number): JsonValue[] {
    const items: JsonValue[] = []
    this.at++
    this.space()
    if (this.text[this.at] === ']') {
      this.at++
      return items
    }
    for (;;) {
      this.space()
      items.push(this.value(depth + 1))
      this.space()
      const c = this.text[this.at++]
      if (c === ']') return items
      if (c !== ',') { this.at--; this.fail('an array whose items are not separated by ","') }
    }
  }

  object (depth: number): JsonObject {
    const object = Object.create(null) as JsonObject
    const keys = new Set<string>()
    this.at++
    this.space()
    if (this.text[this.at] === '}') {
      this.at++
      return object
    }
    for (;;) {
      this.space()
      if (this.text[this.at] !== '"') this.fail('an object key that is not a string')
      const keyAt = this.at
      const key = this.string()
      if (keys.has(key)) { this.at = keyAt; this.fail(`the key ${JSON.stringify(key)} twice in one object`) }
      keys.add(key)
      this.space()
      if (this.text[this.at++] !== ':') { this.at--; this.fail('a key without ":"') }
      this.space()
      object[key] = this.value(depth + 1)
      this.space()
      const c = this.text[this.at++]
      if (c === '}') return object
      if (c !== ',') { this.at--; this.fail('an object whose members are not separated by ","') }
    }
  }
}
