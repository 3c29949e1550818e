// Credentials out of logged URLs: a query parameter whose name says it holds a secret (token,
// access_token, api_key, password, signature, sig, session, ...) keeps its name and loses its value,
// and the rest of the URL stays as sent, so a log line still says what was asked. Clients put
// tokens in query strings (OAuth's access_token, presigned URLs), and a log is read by more people
// than the credentials' owners. The header names and log paths redacted are here too: one home
// for what never reaches a log.

/** Parameter names that hold credentials, matched on the decoded, lower-case name. */
const CREDENTIAL_NAME = /token|secret|passw|pwd|passphrase|signature|credential|session|jwt|authoriz|(?:^|[^a-z])auth(?:$|[^a-z])|api[-_.]?key|private[-_.]?key|^key$|^sig$|^pass$|^code$/

export const REDACTED = '[redacted]'

/** Secrets that must never reach a log line, should anything log a request, its headers or a body. */
export const CREDENTIAL_HEADERS = ['authorization', 'proxy-authorization', 'x-api-signature', 'signature', 'cookie', 'set-cookie'] as const
/** pino's redact paths for them (every logger of the gateway's processes: censor REDACTED) */
export const REDACTED_PATHS = [
  ...CREDENTIAL_HEADERS.flatMap((name) => [`req.headers["${name}"]`, `headers["${name}"]`, `*.headers["${name}"]`]),
  'body.password', 'password', 'token', 'signature', 'privateKey'
]

function decodedName (name: string): string {
  try {
    return decodeURIComponent(name.replaceAll('+', ' ')).toLowerCase()
  } catch {
    return name.toLowerCase()
  }
}

/**
 * The URL (origin-form target: path and query) with the values of credential-named parameters
 * replaced by [redacted]. A fragment, which no request target may carry (the target rules refuse
 * it, and the refusal is logged), is replaced whole: OAuth's implicit flow puts access_token there.
 */
export function redactUrl (url: string): string {
  const hash = url.indexOf('#')
  const end = hash === -1 ? url.length : hash
  const first = url.indexOf('?')
  const query = first < end ? first : -1
  const fragment = hash === -1 ? '' : REDACTED
  // no query string: nothing to look at (the common case costs two scans)
  if (query === -1) return hash === -1 ? url : `${url.slice(0, hash)}${fragment}`
  let changed = hash !== -1
  const pairs = url.slice(query + 1, end).split('&').map((pair) => {
    const equals = pair.indexOf('=')
    const name = equals === -1 ? pair : pair.slice(0, equals)
    if (!CREDENTIAL_NAME.test(decodedName(name))) return pair
    changed = true
    return `${name}=${REDACTED}`
  })
  if (!changed) return url
  return `${url.slice(0, query + 1)}${pairs.join('&')}${fragment}`
}
