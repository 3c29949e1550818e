/** A setting that cannot be used: the message names the variable and what is allowed. */
export class ConfigError extends Error {
  override name = 'ConfigError'
}
