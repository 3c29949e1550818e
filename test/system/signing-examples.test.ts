// docs/signing-examples.md shows the exact bytes of both schemes for fixed keys (the RFC 9421 test
// keys), a fixed time and a fixed body. Every value there is recomputed here from those inputs: the
// signing string, the signature base and the apiKey with the protocol core (client/src/protocol),
// hashes with openssl, and signatures with the page's own openssl commands, run as shown. The
// deterministic signatures (RSA PKCS#1 v1.5, Ed25519) must be those on the page; the randomised
// ones (rsa-pss-sha512, ECDSA) must verify, checked with openssl. Then the page's requests, sent as
// shown (with a real token) to a gateway whose clock reads the page's time, are accepted, after the
// page's registration proofs registered its keys.
//
// After a deliberate change (another body, another nonce), rewrite the page's values with:
//   KEYGATE_WRITE_EXAMPLES=1 npx tap test/system/signing-examples.test.ts
import { execFileSync, spawnSync } from 'node:child_process'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import {
  apiKeyOfSpki, contentDigestValue, requestComponentValue, serializeSignatureParams, signatureBase, signingString,
  type ComponentId, type KeyType, type MessageSignatureAlgorithm, type SignedMessage
} from '../../client/src/protocol/index.js'
import { docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { startRecorder } from '../helpers/recorder.js'
import { addUser, login, startTestGateway } from '../helpers/stack.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const PAGE = join(ROOT, 'docs', 'signing-examples.md')

// The inputs of the examples, as the page states them.
const KEY_FILES: Record<KeyType, string> = {
  rsa: 'test/fixtures/rfc9421/test-key-rsa.pem',
  ed25519: 'test/fixtures/rfc9421/test-key-ed25519.pem',
  p256: 'test/fixtures/rfc9421/test-key-ecc-p256.pem'
}
const CLOCK = 1_790_000_000_000
const SCHEME = 'http'
const HOST = '127.0.0.1:8080'
const METHOD = 'POST'
const TARGET = '/v1/clients/'
const CONTENT_TYPE = 'application/json'
const BODY = '{"name":"Ada Lovelace","email":"ada@example.com","tax_id":"12345678"}'
const NONCE = 'Ff4XP5ewENnqBInHfROLCg'
const LABEL = 'sig1'
const NAME = 'laptop'

/** RFC 9421's algorithms, with the key that signs each; the page's signing command of each has its name. */
const ALGORITHMS: ReadonlyArray<{ alg: MessageSignatureAlgorithm; keyType: KeyType }> = [
  { alg: 'rsa-v1_5-sha256', keyType: 'rsa' },
  { alg: 'rsa-pss-sha512', keyType: 'rsa' },
  { alg: 'ed25519', keyType: 'ed25519' },
  { alg: 'ecdsa-p256-sha256', keyType: 'p256' }
]
/** The seed scheme's (and registration's) signature of each key type, by the name of its command on the page. */
const SEED_KEY_TYPES: readonly KeyType[] = ['rsa', 'ed25519', 'p256']
/** The signatures that differ each time they are made: checked by verifying them, never by comparing. */
const RANDOMISED = new Set(['rsa-pss-sha512', 'p256', 'ecdsa-p256-sha256'])

const work = mkdtempSync(join(tmpdir(), 'keygate-signing-examples-'))
t.teardown(() => { rmSync(work, { recursive: true, force: true }) })

function openssl (args: string[], input?: string | Uint8Array): Buffer {
  return execFileSync('openssl', args, { input, cwd: work, stdio: ['pipe', 'pipe', 'pipe'] })
}

const sha256Hex = (parts: readonly Uint8Array[]): string => openssl(['dgst', '-sha256', '-r'], Buffer.concat(parts)).toString().split(' ')[0] as string
const publicPem = (keyType: KeyType): string => openssl(['pkey', '-in', join(ROOT, KEY_FILES[keyType]), '-pubout']).toString()
const apiKeyOf = (keyType: KeyType): string => apiKeyOfSpki(openssl(['pkey', '-pubin', '-outform', 'DER'], publicPem(keyType)), sha256Hex)

// ---- the page: its marked code blocks, by name ----

const BLOCK = /<!-- example:([a-z0-9_.-]+) -->\n```[a-z]*\n([\s\S]*?)```/g

function blocksOf (page: string): Map<string, string> {
  return new Map([...page.matchAll(BLOCK)].map(([, name, text]) => [name as string, (text as string).replace(/\n$/, '')]))
}

/** The page with the block `name` holding `text`. */
function withBlock (page: string, name: string, text: string): string {
  const block = new RegExp(`(<!-- example:${name} -->\\n\`\`\`[a-z]*\\n)[\\s\\S]*?(\`\`\`)`)
  return page.replace(block, (_, open: string, close: string) => `${open}${text}\n${close}`)
}

/** The signing commands of the page's `commands` block, by each name its comment line gives them. */
function commandsOf (block: string): Map<string, string> {
  const commands = new Map<string, string>()
  for (const [, names, command] of block.matchAll(/^# ([a-z0-9_, -]+):.*\n((?:[^#\n].*\n?)+)/gm)) {
    for (const name of (names as string).split(', ')) commands.set(name, (command as string).trim())
  }
  return commands
}

// ---- signatures, with the page's commands; verification, with openssl's own ----

/** What the page's command `name` makes of `data` with the key of `keyType`: base64. */
function signWith (commands: Map<string, string>, name: string, keyType: KeyType, data: Uint8Array): string {
  const command = commands.get(name)
  if (command === undefined) throw new Error(`the page has no signing command for ${name}`)
  copyFileSync(join(ROOT, KEY_FILES[keyType]), join(work, 'key.pem'))
  writeFileSync(join(work, 'data.txt'), data)
  return execFileSync('bash', ['-c', `set -o pipefail; ${command}`], { cwd: work, encoding: 'utf8' }).trim()
}

/** DER ECDSA-Sig-Value of a 64-byte r||s. */
function derOfRaw (raw: Buffer): Buffer {
  const integer = (half: Buffer): Buffer => {
    let bytes = half
    while (bytes.length > 1 && bytes[0] === 0 && ((bytes[1] ?? 0) & 0x80) === 0) bytes = bytes.subarray(1)
    if (((bytes[0] ?? 0) & 0x80) !== 0) bytes = Buffer.concat([Buffer.from([0]), bytes])
    return Buffer.concat([Buffer.from([0x02, bytes.length]), bytes])
  }
  const content = Buffer.concat([integer(raw.subarray(0, 32)), integer(raw.subarray(32))])
  return Buffer.concat([Buffer.from([0x30, content.length]), content])
}

const VERIFY_ARGS: Record<string, string[]> = {
  'rsa-pss-sha512': ['-sha512', '-sigopt', 'rsa_padding_mode:pss', '-sigopt', 'rsa_pss_saltlen:64', '-sigopt', 'rsa_mgf1_md:sha512'],
  p256: ['-sha256'],
  'ecdsa-p256-sha256': ['-sha256']
}

/** Whether openssl verifies the base64 signature `name` makes over `data` with the public half of `keyType`'s key. */
function verifies (name: string, keyType: KeyType, data: Uint8Array, signature: string): boolean {
  const bytes = Buffer.from(signature, 'base64')
  writeFileSync(join(work, 'public.pem'), publicPem(keyType))
  writeFileSync(join(work, 'signed.bin'), data)
  writeFileSync(join(work, 'signature.bin'), name === 'ecdsa-p256-sha256' ? (bytes.length === 64 ? derOfRaw(bytes) : Buffer.alloc(0)) : bytes)
  const args = ['dgst', ...(VERIFY_ARGS[name] ?? []), '-verify', 'public.pem', '-signature', 'signature.bin', 'signed.bin']
  return spawnSync('openssl', args, { cwd: work }).status === 0
}

// ---- the values of the page, computed ----

const utf8 = new TextEncoder()
const join8 = (parts: readonly Uint8Array[]): Buffer => Buffer.concat(parts)

/** `hexdump -C`: offset, 16 bytes in two groups of 8, the printable ones between bars; then the length. */
function hexdump (bytes: Buffer): string {
  const lines: string[] = []
  for (let at = 0; at < bytes.length; at += 16) {
    const row = bytes.subarray(at, at + 16)
    const hex = [...row].map((byte) => byte.toString(16).padStart(2, '0'))
    const groups = `${hex.slice(0, 8).join(' ')}  ${hex.slice(8).join(' ')}`.padEnd(48)
    const text = [...row].map((byte) => byte >= 0x20 && byte < 0x7f ? String.fromCharCode(byte) : '.').join('')
    lines.push(`${at.toString(16).padStart(8, '0')}  ${groups}  |${text}|`)
  }
  lines.push(bytes.length.toString(16).padStart(8, '0'))
  return lines.join('\n')
}

/** The parts of an HTTP request as the page shows one: request line, header lines, a blank line, the body. */
function httpRequest (headers: Array<[string, string]>): string {
  return [`${METHOD} ${TARGET} HTTP/1.1`, ...headers.map(([name, value]) => `${name}: ${value}`), '', BODY].join('\n')
}

const COMMON_HEADERS: Array<[string, string]> = [
  ['Host', HOST], ['Authorization', 'Bearer <token>'], ['Content-Type', CONTENT_TYPE], ['Content-Length', String(utf8.encode(BODY).length)]
]

/** The RFC 9421 parts of the request for `alg`: Content-Digest, the Signature-Input member value, and the signature base. */
function messageSignature (alg: MessageSignatureAlgorithm, keyType: KeyType): { digest: string; params: string; base: string } {
  const digest = contentDigestValue('sha-256', openssl(['dgst', '-sha256', '-binary'], BODY).toString('base64'))
  const fields: Record<string, string> = { 'content-digest': digest, 'content-type': CONTENT_TYPE }
  const message: SignedMessage = {
    method: METHOD, target: TARGET, scheme: SCHEME, authority: HOST, field: (name) => fields[name] === undefined ? undefined : [fields[name] as string]
  }
  const components: ComponentId[] = [{ name: '@method' }, { name: '@target-uri' }, { name: 'content-digest' }, { name: 'content-type' }]
  const params = serializeSignatureParams(components, [['created', CLOCK / 1000], ['keyid', apiKeyOf(keyType)], ['alg', alg], ['nonce', NONCE]])
  const lines = components.map((component) => [component, requestComponentValue(message, component)] as const)
  return { digest, params, base: signatureBase(lines, params) }
}

/** The `Name: value` lines of a block of the page, by lowercase name. */
function headerLines (block: string | undefined): Record<string, string> {
  const lines = (block ?? '').split('\n').map((line) => /^([A-Za-z-]+): (.*)$/.exec(line)).filter((match) => match !== null)
  return Object.fromEntries(lines.map(([, name, value]) => [(name as string).toLowerCase(), value as string]))
}

/**
 * Every block of the page, computed: `current` gives the page's blocks, whose randomised
 * signatures are kept when they verify (and made anew by the page's command when they do not).
 */
function computedBlocks (current: Map<string, string>): Map<string, string> {
  const commands = commandsOf(current.get('commands') ?? '')
  const blocks = new Map<string, string>()
  const signature = (name: string, keyType: KeyType, data: Uint8Array, shown: string | undefined): string =>
    RANDOMISED.has(name) && shown !== undefined && verifies(name, keyType, data, shown) ? shown : signWith(commands, name, keyType, data)

  blocks.set('keys', [
    'keyType  file                                         apiKey',
    ...SEED_KEY_TYPES.map((keyType) => `${keyType.padEnd(9)}${KEY_FILES[keyType].padEnd(45)}${apiKeyOf(keyType)}`)
  ].join('\n'))
  blocks.set('body', BODY)

  const ts = String(CLOCK)
  const seed = join8(signingString(ts, METHOD, TARGET, utf8.encode(BODY)))
  blocks.set('seed-signing-string', seed.toString('utf8'))
  blocks.set('seed-signing-string-bytes', hexdump(seed))
  blocks.set('seed-signing-string-sha256', `length   ${seed.length} bytes\nSHA-256  ${sha256Hex([seed])}`)
  for (const keyType of SEED_KEY_TYPES) {
    const name = keyType === 'rsa' ? 'seed-request-rsa' : `seed-headers-${keyType}`
    const headers: Array<[string, string]> = [
      ['X-API-Key', apiKeyOf(keyType)], ['X-API-Timestamp', ts],
      ['X-API-Signature', signature(keyType, keyType, seed, headerLines(current.get(name))['x-api-signature'])]
    ]
    blocks.set(name, keyType === 'rsa' ? httpRequest([...COMMON_HEADERS, ...headers]) : headers.map(([header, value]) => `${header}: ${value}`).join('\n'))
  }

  for (const { alg, keyType } of ALGORITHMS) {
    const { digest, params, base } = messageSignature(alg, keyType)
    blocks.set('content-digest', `Content-Digest: ${digest}`)
    blocks.set(`rfc9421-base-${alg}`, base)
    const name = alg === 'rsa-v1_5-sha256' ? `rfc9421-request-${alg}` : `rfc9421-headers-${alg}`
    const shown = /^sig1=:(.*):$/.exec(headerLines(current.get(name)).signature ?? '')?.[1]
    const headers: Array<[string, string]> = [
      ['Signature-Input', `${LABEL}=${params}`], ['Signature', `${LABEL}=:${signature(alg, keyType, utf8.encode(base), shown)}:`]
    ]
    blocks.set(name, alg === 'rsa-v1_5-sha256'
      ? httpRequest([...COMMON_HEADERS, ['Content-Digest', digest], ...headers])
      : headers.map(([header, value]) => `${header}: ${value}`).join('\n'))
  }

  const shownProofs = new Map((current.get('registration') ?? '').split('\n').map((line) => line.split(/ +/) as [string, string]))
  blocks.set('registration', [
    `name     ${NAME}`,
    ...SEED_KEY_TYPES.map((keyType) => `${keyType.padEnd(9)}${signature(keyType, keyType, utf8.encode(NAME), shownProofs.get(keyType))}`)
  ].join('\n'))
  blocks.set('commands', current.get('commands') ?? '')
  return blocks
}

let page = readFileSync(PAGE, 'utf8')
const computed = computedBlocks(blocksOf(page))
if (process.env.KEYGATE_WRITE_EXAMPLES === '1') {
  for (const [name, text] of computed) page = withBlock(page, name, text)
  writeFileSync(PAGE, page)
}
const shown = blocksOf(page)

t.test('every value on the page is the one the protocol core and openssl compute', async (t) => {
  t.same([...shown.keys()].sort(), [...computed.keys()].sort(), 'the page shows every example, and no other')
  for (const [name, text] of computed) {
    t.equal(shown.get(name), text, `${name} (after a deliberate change: KEYGATE_WRITE_EXAMPLES=1 npx tap test/system/signing-examples.test.ts)`)
  }
})

t.test('the page\'s commands make signatures that verify, and its randomised signatures verify', async (t) => {
  t.equal(`${shown.get('commands') ?? ''}\n`, docSnippet('docs/signing-examples.md', 'The signatures with openssl', 'sh'),
    'the marked block is the section\'s one sh block')
  const commands = commandsOf(shown.get('commands') ?? '')
  t.same([...commands.keys()].sort(), ['ecdsa-p256-sha256', 'ed25519', 'p256', 'rsa', 'rsa-pss-sha512', 'rsa-v1_5-sha256'], 'a command per algorithm')
  const data = utf8.encode('the exact bytes')
  for (const name of RANDOMISED) {
    const keyType = name === 'rsa-pss-sha512' ? 'rsa' : 'p256'
    const made = signWith(commands, name, keyType, data)
    t.ok(verifies(name, keyType, data, made), `${name}: what the command makes verifies`)
    t.not(signWith(commands, name, keyType, data), made, `${name}: and is another signature each time`)
    t.notOk(verifies(name, keyType, utf8.encode('other bytes'), made), `${name}: over those bytes only`)
  }
  t.equal(Buffer.from(signWith(commands, 'ecdsa-p256-sha256', 'p256', data), 'base64').length, 64, 'r||s is 64 bytes')
  t.equal(Buffer.from(signWith(commands, 'p256', 'p256', data), 'base64')[0], 0x30, 'DER is an ASN.1 sequence')
})

t.test('the page\'s requests, sent as shown, pass a gateway whose clock reads the page\'s time', async (t) => {
  const upstream = await startRecorder(t)
  const gw = await startTestGateway(t, { store: 'memory', upstreamUrl: upstream.url, now: () => CLOCK })
  await addUser(gw, 'alice')
  const token = await login(gw.url, 'alice')

  const proofs = new Map((shown.get('registration') ?? '').split('\n').map((line) => line.split(/ +/) as [string, string]))
  for (const keyType of SEED_KEY_TYPES) {
    const registered = await send(gw.url, '/v1/api-keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: proofs.get('name'), publicKey: publicPem(keyType), signature: proofs.get(keyType) })
    })
    t.equal(registered.status, 201, `the ${keyType} key registers with the page's proof: ${registered.text}`)
  }

  // Each request of the page: a full one, or the full one of its scheme with another key's header lines.
  const requests = [
    ...SEED_KEY_TYPES.map((keyType) => ({ what: `seed, ${keyType}`, full: 'seed-request-rsa', lines: `seed-headers-${keyType}` })),
    ...ALGORITHMS.map(({ alg }) => ({ what: `rfc9421, ${alg}`, full: 'rfc9421-request-rsa-v1_5-sha256', lines: `rfc9421-headers-${alg}` }))
  ]
  for (const { what, full, lines } of requests) {
    const [head = '', body = ''] = (shown.get(full) ?? '').split('\n\n')
    const [method = '', target = ''] = head.split(' ')
    const headers = { ...headerLines(head), ...headerLines(shown.get(lines)), authorization: `Bearer ${token}` }
    const before = upstream.requests.length
    const res = await send(gw.url, target, { method, headers, body })
    t.equal(res.status, 200, `${what}: accepted (${res.text})`)
    t.equal(upstream.requests.length, before + 1, `${what}: forwarded`)
    t.equal(upstream.requests.at(-1)?.body.toString(), BODY, `${what}: with the body as signed`)
  }
})
