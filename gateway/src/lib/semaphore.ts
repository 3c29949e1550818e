// A counting semaphore with a bounded queue: at most `concurrency` holders at once, at most
// `maxWaiting` waiting, and an immediate "no" beyond that, so the queue can never grow without end.
// Used to bound password verifications (scrypt) so that a login storm cannot take every CPU.
import { integerOption } from './integer-option.js'

/** A place at the semaphore: held at once, or waiting in the queue until `ready` resolves. */
export interface Permit {
  /** resolves when the permit holds a slot (at once when one was free) */
  readonly ready: Promise<void>
  /** frees the slot (for the next waiter) or leaves the queue; idempotent */
  release: () => void
}

export class Semaphore {
  readonly concurrency: number
  readonly maxWaiting: number
  #running = 0
  readonly #queue: Array<() => void> = []

  constructor (concurrency: number, maxWaiting: number) {
    integerOption('concurrency', concurrency, 1)
    integerOption('maxWaiting', maxWaiting, 0)
    this.concurrency = concurrency
    this.maxWaiting = maxWaiting
  }

  /** holders right now */
  get running (): number { return this.#running }
  /** permits waiting for a slot */
  get waiting (): number { return this.#queue.length }

  /** A slot now, or a place in the queue; null when every slot is taken and the queue is full. */
  tryAcquire (): Permit | null {
    let state: 'held' | 'waiting' | 'released'
    let grant: () => void = () => {}
    if (this.#running < this.concurrency) {
      this.#running++
      state = 'held'
    } else if (this.#queue.length < this.maxWaiting) {
      state = 'waiting'
    } else {
      return null
    }
    const ready = state === 'held'
      ? Promise.resolve()
      : new Promise<void>((resolve) => {
        grant = () => { state = 'held'; resolve() }
        this.#queue.push(grant)
      })
    const release = (): void => {
      if (state === 'waiting') {
        const index = this.#queue.indexOf(grant)
        if (index !== -1) this.#queue.splice(index, 1)
      } else if (state === 'held') {
        // The slot passes straight to the next waiter, so `running` never dips below a full house
        // while someone waits.
        const next = this.#queue.shift()
        if (next === undefined) this.#running--
        else next()
      }
      state = 'released'
    }
    return { ready, release }
  }
}
