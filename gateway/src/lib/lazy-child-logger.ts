// A request's logger, made only when the request logs something. Fastify makes a child logger for
// every request (its bindings: the request id); with redaction configured, pino runs the redactor
// over those bindings each time, about 2% of a signed GET's CPU (profiled) for a logger that most
// requests never write to below LOG_LEVEL=info. The child made on first use is exactly the one
// Fastify would have made (same parent, bindings and options), so lines and redaction are unchanged.
import type { FastifyBaseLogger } from 'fastify'
import type { Bindings, ChildLoggerOptions, LevelWithSilentOrString } from 'pino'

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace'

/** pino's LogFn is overloaded (object first, or message first): the arguments pass through as they came */
type LogArgs = [unknown, ...unknown[]]

export class LazyChildLogger {
  readonly #parent: FastifyBaseLogger
  readonly #bindings: Bindings
  readonly #options: ChildLoggerOptions
  #child: FastifyBaseLogger | undefined

  constructor (parent: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions) {
    this.#parent = parent
    this.#bindings = bindings
    this.#options = options
  }

  get #real (): FastifyBaseLogger {
    return (this.#child ??= this.#parent.child(this.#bindings, this.#options))
  }

  /** Whether a line at `level` would be written: the child's level, else the one it would get. */
  #writes (level: Level): boolean {
    if (this.#child !== undefined) return true
    const wanted = this.#options.level ?? this.#parent.level
    const values = (this.#parent as { levels?: { values: Record<string, number> } }).levels?.values
    if (values === undefined) return true
    const threshold = values[wanted]
    return threshold === undefined || (values[level] as number) >= threshold
  }

  /** pino's own check, for a caller that would build a line only to have it dropped: makes no child. */
  isLevelEnabled (level: Level): boolean {
    const real = this.#child as (FastifyBaseLogger & { isLevelEnabled?: (level: string) => boolean }) | undefined
    return real?.isLevelEnabled?.(level) ?? this.#writes(level)
  }

  get level (): LevelWithSilentOrString {
    return this.#child?.level ?? this.#options.level ?? this.#parent.level
  }

  set level (level: LevelWithSilentOrString) {
    this.#real.level = level
  }

  fatal (...args: LogArgs): void { if (this.#writes('fatal')) (this.#real.fatal as (...a: LogArgs) => void)(...args) }
  error (...args: LogArgs): void { if (this.#writes('error')) (this.#real.error as (...a: LogArgs) => void)(...args) }
  warn (...args: LogArgs): void { if (this.#writes('warn')) (this.#real.warn as (...a: LogArgs) => void)(...args) }
  info (...args: LogArgs): void { if (this.#writes('info')) (this.#real.info as (...a: LogArgs) => void)(...args) }
  debug (...args: LogArgs): void { if (this.#writes('debug')) (this.#real.debug as (...a: LogArgs) => void)(...args) }
  trace (...args: LogArgs): void { if (this.#writes('trace')) (this.#real.trace as (...a: LogArgs) => void)(...args) }
  silent (): void {}

  child (bindings: Bindings, options?: ChildLoggerOptions): FastifyBaseLogger {
    return this.#real.child(bindings, options)
  }
}

/** Fastify's `childLoggerFactory`: the request's logger, made when first written to. */
export function lazyChildLoggerFactory (logger: FastifyBaseLogger, bindings: Bindings, options: ChildLoggerOptions): FastifyBaseLogger {
  return new LazyChildLogger(logger, bindings, options) as unknown as FastifyBaseLogger
}
