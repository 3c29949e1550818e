// A count of bytes that many holders share, with a ceiling: a holder takes bytes as it comes to hold
// them and gives them back when it lets go; a take that would pass the ceiling is refused, so the
// total never exceeds it. Used to bound the request bodies buffered across all requests at once.
import { integerOption } from './integer-option.js'

export class ByteBudget {
  readonly limit: number
  #used = 0

  constructor (limit: number) {
    this.limit = integerOption('limit', limit, 0)
  }

  /** bytes held right now, by every holder together */
  get used (): number { return this.#used }

  /** Takes `bytes` when they fit under the limit; false (and nothing taken) when they do not. */
  tryTake (bytes: number): boolean {
    if (this.#used + bytes > this.limit) return false
    this.#used += bytes
    return true
  }

  /** Gives back bytes taken before. */
  give (bytes: number): void {
    this.#used = Math.max(0, this.#used - bytes)
  }
}
