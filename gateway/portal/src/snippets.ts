// The portal's snippets: the request a developer just made on the "Try it" page, as three programs
// to run (bash with curl and openssl, Node.js with @keygate/client, Python with cryptography), with
// their apiKey, the target and the body written in. Each signs anew on every run, sends, and
// prints the answer's status and body. Plain string building (URL aside, no browser or Node API):
// bundled into the page and imported by the tests that run what it writes
// (test/system/portal-snippets.test.ts).
import { ALGORITHMS_OF_KEY_TYPE, isTargetByte, METHOD_TOKEN, type KeyType } from '#client/protocol'

export interface SnippetRequest {
  /** keygate's origin as the page called it: RFC 9421's @target-uri starts with it */
  baseUrl: string
  method: string
  /** path and query, exactly as sent */
  target: string
  /** UTF-8 text, '' = no body */
  body: string
  apiKey: string
  keyType: KeyType
  scheme: 'seed' | 'rfc9421'
}

export interface Snippets { curl: string; client: string; python: string }

/** What every snippet takes as given: the private key's file, and the variable holding the bearer token. */
const KEY_FILE = 'key.pem'
const TOKEN_VARIABLE = 'KEYGATE_TOKEN'
/** The Content-Type a body is sent with, as @keygate/client sends it by default (and RFC 9421 signs it). */
const CONTENT_TYPE = 'application/json'
const KEY_NAMES: Record<KeyType, string> = { rsa: 'an RSA key', ed25519: 'an Ed25519 key', p256: 'a P-256 key' }

// ---- quoting: each language's literal for any text, byte for byte ----

const hex = (code: number, digits: number): string => code.toString(16).padStart(digits, '0')
/** A C0 or C1 control character, or DEL */
const isControl = (code: number): boolean => code < 0x20 || (code >= 0x7f && code <= 0x9f)
/** Whether the UTF-16 code unit at `i` is half of a surrogate pair that is not whole */
function isLoneSurrogate (text: string, i: number): boolean {
  const code = text.charCodeAt(i)
  if (code >= 0xd800 && code <= 0xdbff) return !(text.charCodeAt(i + 1) >= 0xdc00 && text.charCodeAt(i + 1) <= 0xdfff)
  if (code >= 0xdc00 && code <= 0xdfff) return !(text.charCodeAt(i - 1) >= 0xd800 && text.charCodeAt(i - 1) <= 0xdbff)
  return false
}

/** `text` with each UTF-16 code unit `escape` returns something for replaced by that. */
function escaped (text: string, escape: (char: string, code: number, i: number) => string | undefined): string {
  let out = ''
  for (let i = 0; i < text.length; i++) out += escape(text.charAt(i), text.charCodeAt(i), i) ?? text.charAt(i)
  return out
}

/**
 * A JavaScript or Python string literal (the escapes used mean the same in both), in `preferred`
 * quotes unless the other kind needs fewer escapes.
 */
function stringLiteral (text: string, preferred: '\'' | '"'): string {
  const other = preferred === '"' ? '\'' : '"'
  const quote = text.split(preferred).length > text.split(other).length ? other : preferred
  const named: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t', [quote]: `\\${quote}` }
  // other controls, line separators (line ends in JavaScript) and lone surrogates as \uXXXX
  return quote + escaped(text, (char, code, i) => named[char] ??
    (isControl(code) || code === 0x2028 || code === 0x2029 || isLoneSurrogate(text, i) ? `\\u${hex(code, 4)}` : undefined)) + quote
}

const jsString = (text: string): string => stringLiteral(text, '\'')
const pyString = (text: string): string => stringLiteral(text, '"')

/**
 * A bash word holding `text`: single-quoted ($, `, \ and % stay as they are), ' as '\'', a control
 * character but a newline as $'\xHH'. A NUL cannot be in a bash word: bashBytes writes one.
 */
export function bashWord (text: string): string {
  const word = `'${escaped(text, (char, code) =>
    char === '\'' ? '\'\\\'\'' : code !== 0x0a && (code < 0x20 || code === 0x7f) ? `'$'\\x${hex(code, 2)}''` : undefined)}'`
  // without the empty '' a quote or control character at either end leaves
  return word === '\'\'' ? word : word.replace(/^''/, '').replace(/([^\\])''$/, '$1')
}

/** A bash command that writes `text` as UTF-8, with nothing added (printf %s writes no newline). */
function bashBytes (text: string): string {
  const parts = text.split('\0').map((part) => part === '' ? '' : `printf %s ${bashWord(part)}`)
  if (parts.length === 1) return parts[0] as string
  return `{ ${parts.flatMap((part, i) => [...(i > 0 ? ['printf \'\\0\''] : []), ...(part === '' ? [] : [part])]).join('; ')}; }`
}

/** Text shown in a comment: printable ASCII only, so that nothing in it ends the comment. */
const commentText = (text: string): string => escaped(text, (_, code) => code >= 0x20 && code < 0x7f ? undefined : `\\u${hex(code, 4)}`)

/** What the browser sent for a body: UTF-8, in which a lone surrogate is U+FFFD (TextEncoder's rule). */
const wellFormed = (text: string): string => escaped(text, (_, __, i) => isLoneSurrogate(text, i) ? '\ufffd' : undefined)

// ---- the request ----

interface Request extends SnippetRequest {
  /** scheme://host[:port] as sent, lowercased, no default port: what @target-uri begins with */
  origin: string
  /** RFC 9421's alg, the key type's own */
  alg: string
}

function checked (request: SnippetRequest): Request {
  const { method, keyType, scheme } = request
  if (!METHOD_TOKEN.test(method)) throw new TypeError(`method: ${JSON.stringify(method)} is not an HTTP method`)
  if (!Object.hasOwn(ALGORITHMS_OF_KEY_TYPE, keyType)) throw new TypeError(`keyType: ${JSON.stringify(keyType)} is not rsa, ed25519 or p256`)
  if (scheme !== 'seed' && scheme !== 'rfc9421') throw new TypeError(`scheme: ${JSON.stringify(scheme)} is not seed or rfc9421`)
  const url = new URL(request.baseUrl)
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`baseUrl: ${JSON.stringify(request.baseUrl)} is not an http(s) origin`)
  return { ...request, body: wellFormed(request.body), origin: url.origin, alg: ALGORITHMS_OF_KEY_TYPE[keyType][0] as string }
}

/** The lines at the top of each snippet (without comment marks): what it does, and what it takes as given. */
function header (request: Request, run: string, needs: string): string[] {
  const signed = request.scheme === 'seed' ? 'the seed scheme (X-API-* headers)' : `RFC 9421 (alg ${request.alg})`
  const lines = [
    `keygate: ${commentText(`${request.method} ${request.target}`)}, signed with ${signed} by ${KEY_NAMES[request.keyType]}. Run: ${run}`,
    `Needs ${needs}.`,
    `The private key: ${KEY_FILE} in the current directory, PKCS#8 PEM (what the portal's "download for the CLI" and openssl genpkey write).`,
    `The bearer token: the environment variable ${TOKEN_VARIABLE}; get one (it lasts 15 minutes by default) with`,
    `  export ${TOKEN_VARIABLE}=$(curl -sS ${bashWord(`${request.origin}/v1/auth/token`)} -H 'Content-Type: application/json' \\`,
    '    -d \'{"username":"YOUR_USERNAME","password":"YOUR_PASSWORD"}\' | sed -nE \'s/.*"token":"([^"]+)".*/\\1/p\')',
    `Each run signs anew (${request.scheme === 'seed' ? 'a new timestamp' : 'a new created time and nonce'}): ` +
      'keygate takes a signed POST, PUT, PATCH or DELETE once, and refuses it sent again.'
  ]
  if (request.scheme === 'seed' && request.body !== '' && isTargetByte(request.body.charCodeAt(0))) {
    lines.push('keygate refuses this body in the seed scheme (400 AMBIGUOUS_SIGNED_BODY: it starts with a byte a target may hold); sign it with RFC 9421.')
  }
  return lines
}

// ---- curl and openssl ----

/** Commands that set SIGNATURE to the base64 signature of the file "$DIR/signed", as the scheme takes it. */
function opensslSignature (request: Request): string[] {
  switch (request.keyType) {
    case 'ed25519':
      return [
        '# Ed25519 (openssl signs it from a file, not a pipe)',
        `SIGNATURE=$(openssl pkeyutl -sign -rawin -inkey ${KEY_FILE} -in "$DIR/signed" | openssl base64 -A)`
      ]
    case 'rsa':
      return ['# RSASSA-PKCS1-v1_5 with SHA-256', `SIGNATURE=$(openssl dgst -sha256 -sign ${KEY_FILE} "$DIR/signed" | openssl base64 -A)`]
    case 'p256':
      if (request.scheme === 'seed') {
        return [
          '# ECDSA P-256 with SHA-256, in DER as openssl writes it',
          `SIGNATURE=$(openssl dgst -sha256 -sign ${KEY_FILE} "$DIR/signed" | openssl base64 -A)`
        ]
      }
      return [
        '# ECDSA P-256 with SHA-256; openssl writes DER, RFC 9421 takes r||s: the two integers, 32 bytes each',
        `SIGNATURE=$(openssl dgst -sha256 -sign ${KEY_FILE} "$DIR/signed" | openssl asn1parse -inform DER |`,
        '  sed -nE \'s/.*INTEGER +:([0-9A-F]+)$/\\1/p\' | xargs printf \'%64s\' | tr \' \' 0 | basenc --base16 -d | openssl base64 -A)'
      ]
  }
}

function curlSnippet (request: Request): string {
  const hasBody = request.body !== ''
  // what plain POSIX tools do not do: milliseconds, and hex to bytes
  const [gnu, use] = request.scheme === 'seed' ? ['date', 'date +%s%3N'] : request.keyType === 'p256' ? ['basenc', 'basenc'] : []
  const coreutils = gnu === undefined ? '' : ` and GNU coreutils for ${use} (on macOS: brew install coreutils, then write g${gnu} for ${gnu})`
  const needs = `bash, curl, OpenSSL 3${coreutils}`
  const lines = [
    '#!/usr/bin/env bash',
    ...header(request, 'bash snippet.sh', needs).map((line) => `# ${line}`),
    'set -euo pipefail',
    `: "\${${TOKEN_VARIABLE}:?set ${TOKEN_VARIABLE} to a bearer token: see above}"`,
    `BASE=${bashWord(request.origin)}`,
    `API_KEY=${bashWord(request.apiKey)}`,
    `METHOD=${bashWord(request.method)}`,
    `TARGET=${bashWord(request.target)}   # path and query, exactly as sent and signed`,
    'DIR=$(mktemp -d)',
    'trap \'rm -rf "$DIR"\' EXIT',
    ...(hasBody
      ? ['# the body, byte for byte (printf %s adds no newline; curl --data-binary sends the file as it is)', `${bashBytes(request.body)} > "$DIR/body"`]
      : []),
    ''
  ]
  const signed: string[] = []
  if (request.scheme === 'seed') {
    lines.push(
      '# the signing string: timestamp + METHOD + target + body, nothing between',
      'TIMESTAMP=$(date +%s%3N)   # milliseconds',
      hasBody ? '{ printf %s "$TIMESTAMP$METHOD$TARGET"; cat "$DIR/body"; } > "$DIR/signed"' : 'printf %s "$TIMESTAMP$METHOD$TARGET" > "$DIR/signed"',
      ...opensslSignature(request)
    )
    signed.push('-H "X-API-Key: $API_KEY" -H "X-API-Timestamp: $TIMESTAMP" -H "X-API-Signature: $SIGNATURE"')
  } else {
    const components = ['"@method"', '"@target-uri"', ...(hasBody ? ['"content-digest"', '"content-type"'] : [])]
    if (hasBody) {
      lines.push('DIGEST="sha-256=:$(openssl dgst -sha256 -binary "$DIR/body" | openssl base64 -A):"   # Content-Digest (RFC 9530)')
    }
    lines.push(
      'CREATED=$(date +%s)   # seconds',
      'NONCE=$(openssl rand -hex 16)   # random: two requests alike in one second are still two',
      `PARAMS="(${components.join(' ').replaceAll('"', '\\"')});created=$CREATED;keyid=\\"$API_KEY\\";alg=\\"${request.alg}\\";nonce=\\"$NONCE\\""`,
      '# the signature base: a line per covered component, then @signature-params; no newline after the last',
      `printf '"@method": %s\\n"@target-uri": %s\\n${hasBody ? '"content-digest": %s\\n"content-type": %s\\n' : ''}"@signature-params": %s' \\`,
      `  "$METHOD" "$BASE$TARGET" ${hasBody ? `"$DIGEST" '${CONTENT_TYPE}' ` : ''}"$PARAMS" > "$DIR/signed"`,
      ...opensslSignature(request)
    )
    signed.push(`${hasBody ? '-H "Content-Digest: $DIGEST" ' : ''}-H "Signature-Input: sig1=$PARAMS" -H "Signature: sig1=:$SIGNATURE:"`)
  }
  // -g: no URL globbing ([ and { are literal); --path-as-is: the target is sent as it is, like every byte signed
  const send = request.method === 'HEAD' ? '--head' : '-X "$METHOD"'
  lines.push(
    '',
    `STATUS=$(curl -sS -g --path-as-is -o "$DIR/answer" -w '%{http_code}' ${send} "$BASE$TARGET" \\`,
    `  -H "Authorization: Bearer $${TOKEN_VARIABLE}" \\`,
    `  ${signed.join('')}${hasBody ? ` \\\n  -H 'Content-Type: ${CONTENT_TYPE}' --data-binary "@$DIR/body"` : ''})`,
    'printf \'%s \' "$STATUS"; cat "$DIR/answer"; echo'
  )
  return `${lines.join('\n')}\n`
}

// ---- @keygate/client ----

function clientSnippet (request: Request): string {
  const hasBody = request.body !== ''
  const lines = [
    ...header(request, 'node snippet.mjs', 'Node.js 20 or later and @keygate/client (npm install @keygate/client; see its README)')
      .map((line) => `// ${line}`),
    'import { readFileSync } from \'node:fs\'',
    'import { createClient } from \'@keygate/client\'',
    '',
    `const token = process.env.${TOKEN_VARIABLE}`,
    `if (!token) throw new Error('set ${TOKEN_VARIABLE} to a bearer token: see above')`,
    'const client = createClient({',
    `  baseUrl: ${jsString(request.origin)},`,
    '  token,',
    `  privateKey: readFileSync(${jsString(KEY_FILE)}, 'utf8'),`,
    `  apiKey: ${jsString(request.apiKey)},`,
    `  scheme: ${jsString(request.scheme)}`,
    '})',
    ...(hasBody ? [`// the body, exactly as sent and signed (as ${CONTENT_TYPE})`, `const body = ${jsString(request.body)}`] : []),
    `const response = await client.fetch(${jsString(request.method)}, ${jsString(request.target)}${hasBody ? ', body' : ''})`,
    'console.log(response.status, await response.text())'
  ]
  return `${lines.join('\n')}\n`
}

// ---- Python ----

function pythonSignature (request: Request): string[] {
  switch (request.keyType) {
    case 'ed25519':
      return ['    """Ed25519."""', '    return key.sign(data)']
    case 'rsa':
      return ['    """RSASSA-PKCS1-v1_5 with SHA-256."""', '    return key.sign(data, padding.PKCS1v15(), hashes.SHA256())']
    case 'p256':
      if (request.scheme === 'seed') return ['    """ECDSA P-256 with SHA-256, in DER."""', '    return key.sign(data, ec.ECDSA(hashes.SHA256()))']
      return [
        '    """ECDSA P-256 with SHA-256, as RFC 9421 takes it: r||s, 32 bytes each (not DER)."""',
        '    r, s = decode_dss_signature(key.sign(data, ec.ECDSA(hashes.SHA256())))',
        '    return r.to_bytes(32, "big") + s.to_bytes(32, "big")'
      ]
  }
}

function pythonSnippet (request: Request): string {
  const hasBody = request.body !== ''
  const rfc9421 = request.scheme === 'rfc9421'
  const asymmetric = { ed25519: [], rsa: ['padding'], p256: ['ec'] }[request.keyType]
  const lines = [
    '#!/usr/bin/env python3',
    ...header(request, 'python3 snippet.py',
      'Python 3.7 or later with the cryptography package (Debian: python3-cryptography; else pip install cryptography)').map((line) => `# ${line}`),
    'import base64',
    ...(rfc9421 && hasBody ? ['import hashlib'] : []),
    'import os',
    ...(rfc9421 ? ['import secrets'] : []),
    'import sys',
    'import time',
    'import urllib.error',
    'import urllib.request',
    '',
    `from cryptography.hazmat.primitives import ${request.keyType === 'ed25519' ? '' : 'hashes, '}serialization`,
    ...(asymmetric.length > 0 ? [`from cryptography.hazmat.primitives.asymmetric import ${asymmetric.join(', ')}`] : []),
    ...(rfc9421 && request.keyType === 'p256' ? ['from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature'] : []),
    '',
    `BASE = ${pyString(request.origin)}`,
    `API_KEY = ${pyString(request.apiKey)}`,
    `METHOD = ${pyString(request.method)}`,
    `TARGET = ${pyString(request.target)}  # path and query, exactly as sent and signed`,
    `BODY = ${pyString(request.body)}.encode()  # the body's exact bytes${hasBody ? `, sent as ${CONTENT_TYPE}` : ': none'}`,
    '',
    `token = os.environ.get(${pyString(TOKEN_VARIABLE)}) or sys.exit(${pyString(`set ${TOKEN_VARIABLE} to a bearer token: see above`)})`,
    `with open(${pyString(KEY_FILE)}, "rb") as file:`,
    '    key = serialization.load_pem_private_key(file.read(), password=None)',
    '',
    '',
    'def sign(data):',
    ...pythonSignature(request),
    '',
    '',
    'headers = {"Authorization": f"Bearer {token}"}'
  ]
  if (hasBody) lines.push(`headers["Content-Type"] = ${pyString(CONTENT_TYPE)}`)
  if (!rfc9421) {
    lines.push(
      'timestamp = str(time.time_ns() // 1_000_000)  # milliseconds',
      '# the signing string: timestamp + METHOD + target + body, nothing between',
      'signature = sign((timestamp + METHOD + TARGET).encode() + BODY)',
      'headers.update({"X-API-Key": API_KEY, "X-API-Timestamp": timestamp, "X-API-Signature": base64.b64encode(signature).decode()})'
    )
  } else {
    const components = ['"@method"', '"@target-uri"', ...(hasBody ? ['"content-digest"', '"content-type"'] : [])]
    lines.push(
      'lines = [f\'"@method": {METHOD}\', f\'"@target-uri": {BASE}{TARGET}\']',
      ...(hasBody
        ? [
            'headers["Content-Digest"] = f"sha-256=:{base64.b64encode(hashlib.sha256(BODY).digest()).decode()}:"  # RFC 9530',
            'lines += [f\'"content-digest": {headers["Content-Digest"]}\', f\'"content-type": {headers["Content-Type"]}\']'
          ]
        : []),
      `params = (f'(${components.join(' ')});created={int(time.time())};keyid="{API_KEY}";alg="${request.alg}"'`,
      '          f\';nonce="{secrets.token_hex(16)}"\')',
      'lines.append(f\'"@signature-params": {params}\')',
      '# the signature base: the lines joined by "\\n", none after the last',
      'signature = sign("\\n".join(lines).encode())',
      'headers.update({"Signature-Input": f"sig1={params}", "Signature": f"sig1=:{base64.b64encode(signature).decode()}:"})'
    )
  }
  lines.push(
    '',
    'request = urllib.request.Request(BASE + TARGET, data=BODY or None, method=METHOD, headers=headers)',
    'try:',
    '    with urllib.request.urlopen(request) as answer:',
    '        print(answer.status, answer.read().decode(errors="replace"))',
    'except urllib.error.HTTPError as answer:',
    '    print(answer.code, answer.read().decode(errors="replace"))'
  )
  return `${lines.join('\n')}\n`
}

/** The three snippets of a request the page made. TypeError on a method, key type, scheme or baseUrl that is none. */
export function snippetsFor (request: SnippetRequest): Snippets {
  const checkedRequest = checked(request)
  return { curl: curlSnippet(checkedRequest), client: clientSnippet(checkedRequest), python: pythonSnippet(checkedRequest) }
}
