// `keygate keygen | login | register | call`: the client developer's commands, built on
// the client package (@keygate/client), so the CLI signs exactly as a program using it would.
//
// Configuration: a flag, else an environment variable, else the default.
//   --url URL        KEYGATE_URL       keygate's origin (http://127.0.0.1:8080)
//   --user NAME      KEYGATE_USER      to log in (register, call: when there is no token)
//   --password P     KEYGATE_PASSWORD  else asked at the terminal (or read from piped stdin)
//   --token T        KEYGATE_TOKEN     a bearer token from `login`, instead of logging in each time
//   --key FILE       KEYGATE_KEY       the private key (~/.keygate/NAME.pem)
//   --name NAME                       the key's name: its files and its registered name (default)
//   --scopes A,B                      register: the key's scopes, some of the user's (default: all)
//   --type rsa|ed25519|p256           keygen: the key type (default rsa)
//   --scheme seed|rfc9421             call: X-API-* headers (default) or RFC 9421 Signature-Input/Signature
//   --components target-uri|path      call --scheme rfc9421: cover @target-uri (default) or @path + @query
import { createHash, generateKeyPair, type KeyObject } from 'node:crypto'
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises'
import { homedir } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { parseArgs, promisify } from 'node:util'
import {
  apiKeyOf, type CoveredTarget, createClient, describeSigningString, importPrivateKey, KeygateResponseError, login, registerKey,
  signatureBaseMismatches, signatureMismatches, type SignatureScheme, SigningInputError
} from '#client'
import { KEY_TYPES, type KeyType } from '#client/protocol'
import { keygateCommand } from '../lib/command-name.js'

export const CLIENT_COMMANDS = ['keygen', 'login', 'register', 'call'] as const
export type ClientCommand = (typeof CLIENT_COMMANDS)[number]

export const DEFAULT_URL = 'http://127.0.0.1:8080'
const DEFAULT_KEY_NAME = 'default'
/** the largest signing string -v prints in full */
const VERBOSE_SIGNING_STRING_BYTES = 4096

export interface ClientIo {
  stdin: NodeJS.ReadableStream & { isTTY?: boolean }
  stdout: NodeJS.WritableStream
  stderr: NodeJS.WritableStream
  env: NodeJS.ProcessEnv
  readPassword: () => Promise<string>
}

/** A mistake in the command line: the message says what to do; exit status 2. */
export class ClientUsageError extends Error {}

/** The request was sent and keygate (or the upstream) said no: exit status 1, nothing more to print. */
export class RequestFailed extends Error {}

const OPTIONS = {
  url: { type: 'string' },
  user: { type: 'string' },
  password: { type: 'string' },
  token: { type: 'string' },
  key: { type: 'string' },
  name: { type: 'string' },
  out: { type: 'string' },
  scopes: { type: 'string' },
  header: { type: 'string', short: 'H', multiple: true },
  verbose: { type: 'boolean', short: 'v' },
  type: { type: 'string' },
  scheme: { type: 'string' },
  components: { type: 'string' }
} as const

const ALLOWED: Record<ClientCommand, ReadonlyArray<keyof typeof OPTIONS>> = {
  keygen: ['out', 'name', 'type'],
  login: ['url', 'user', 'password'],
  register: ['url', 'user', 'password', 'token', 'key', 'name', 'scopes'],
  call: ['url', 'user', 'password', 'token', 'key', 'name', 'header', 'verbose', 'scheme', 'components']
}
const POSITIONALS: Record<ClientCommand, [min: number, max: number]> = { keygen: [0, 0], login: [0, 0], register: [0, 0], call: [2, 3] }

type Flags = {
  [K in keyof typeof OPTIONS]?: (typeof OPTIONS)[K] extends { multiple: true } ? string[] : (typeof OPTIONS)[K]['type'] extends 'boolean' ? boolean : string
}

function parse (command: ClientCommand, args: string[], usage: string): { flags: Flags; positionals: string[] } {
  let parsed
  try {
    parsed = parseArgs({ args, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (err) {
    throw new ClientUsageError(`${(err as Error).message}\n\n${usage}`)
  }
  const flags = parsed.values as Flags
  const unexpected = Object.keys(flags).filter((flag) => !ALLOWED[command].includes(flag as keyof typeof OPTIONS))
  if (unexpected.length > 0) throw new ClientUsageError(`${command} takes no --${unexpected.join(', --')}\n\n${usage}`)
  const [min, max] = POSITIONALS[command]
  if (parsed.positionals.length < min || parsed.positionals.length > max) throw new ClientUsageError(usage)
  return { flags, positionals: parsed.positionals }
}

const keyDir = (): string => join(homedir(), '.keygate')
const keyName = (flags: Flags): string => flags.name ?? DEFAULT_KEY_NAME

function keyFile (flags: Flags, env: NodeJS.ProcessEnv): string {
  return resolve(flags.key ?? env.KEYGATE_KEY ?? join(keyDir(), `${keyName(flags)}.pem`))
}

/** key.pem -> key.apikey, beside it */
const apiKeyFile = (privateKeyFile: string): string => privateKeyFile.replace(/(\.pem)?$/, '.apikey')

const baseUrl = (flags: Flags, env: NodeJS.ProcessEnv): string => flags.url ?? env.KEYGATE_URL ?? DEFAULT_URL

async function exists (path: string): Promise<boolean> {
  return await stat(path).then(() => true, () => false)
}

/** The key file's PEM, checked (the error names the file and what is wrong with it) before anything is asked or sent. */
async function readPrivateKey (file: string): Promise<Buffer> {
  let pem: Buffer
  try {
    pem = await readFile(file)
  } catch {
    throw new ClientUsageError(`no private key at ${file}: make one with \`${keygateCommand()} keygen\`, or name yours with --key FILE (or KEYGATE_KEY)`)
  }
  try {
    await importPrivateKey(pem)
  } catch (err) {
    if (err instanceof SigningInputError) throw new ClientUsageError(`key file ${file}: ${err.message.replace(/^privateKey: /, '')}`)
    throw err
  }
  return pem
}

async function password (flags: Flags, io: ClientIo): Promise<string> {
  return flags.password ?? io.env.KEYGATE_PASSWORD ?? await io.readPassword()
}

function user (flags: Flags, io: ClientIo): string {
  const name = flags.user ?? io.env.KEYGATE_USER
  if (name === undefined || name === '') {
    throw new ClientUsageError('no user to log in as: give --user NAME (or KEYGATE_USER), or a token with --token (or KEYGATE_TOKEN)')
  }
  return name
}

/** The bearer token: given, or fresh from a login. */
async function bearerToken (flags: Flags, io: ClientIo): Promise<string> {
  const given = flags.token ?? io.env.KEYGATE_TOKEN
  if (given !== undefined && given !== '') return given
  const username = user(flags, io)
  return (await login({ baseUrl: baseUrl(flags, io.env), username, password: await password(flags, io) })).token
}

function keyType (flag: string | undefined): KeyType {
  if (flag === undefined) return 'rsa'
  if (!(KEY_TYPES as readonly string[]).includes(flag)) throw new ClientUsageError(`--type ${JSON.stringify(flag)}: give one of ${KEY_TYPES.join(', ')}`)
  return flag as KeyType
}

const generate = promisify(generateKeyPair)

/** RSA-2048, Ed25519 or EC P-256: the types keygate registers. */
async function newKeyPair (type: KeyType): Promise<{ privateKey: KeyObject; publicKey: KeyObject }> {
  switch (type) {
    case 'rsa': return await generate('rsa', { modulusLength: 2048 })
    case 'ed25519': return await generate('ed25519')
    case 'p256': return await generate('ec', { namedCurve: 'P-256' })
  }
}

async function keygen (flags: Flags, io: ClientIo): Promise<void> {
  const dir = resolve(flags.out ?? keyDir())
  const name = keyName(flags)
  if (!/^[A-Za-z0-9._-]+$/.test(name)) throw new ClientUsageError(`--name ${JSON.stringify(name)}: use letters, digits, ".", "_" and "-" (it names files)`)
  const privateFile = join(dir, `${name}.pem`)
  const publicFile = join(dir, `${name}.pub.pem`)
  for (const file of [privateFile, publicFile]) {
    if (await exists(file)) throw new ClientUsageError(`${file} exists; keygen never overwrites a key: choose another --name or --out`)
  }
  const { privateKey, publicKey } = await newKeyPair(keyType(flags.type))
  await mkdir(dir, { recursive: true, mode: 0o700 })
  // 'wx': fails rather than replaces, should a file have appeared since the check.
  await writeFile(privateFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600, flag: 'wx' })
  await writeFile(publicFile, publicKey.export({ type: 'spki', format: 'pem' }), { mode: 0o644, flag: 'wx' })
  io.stdout.write([
    `private key: ${privateFile} (${keyType(flags.type)}, mode 0600; never share it)`,
    `public key:  ${publicFile}`,
    `apiKey:      ${await apiKeyOf(publicKey)} (once registered)`,
    `next:        ${keygateCommand()} register${flags.name === undefined ? '' : ` --name ${name}`}${flags.out === undefined ? '' : ` --key ${privateFile}`}`,
    ''
  ].join('\n'))
}

async function loginCommand (flags: Flags, io: ClientIo): Promise<void> {
  const username = user(flags, io)
  const { token, expiresIn } = await login({ baseUrl: baseUrl(flags, io.env), username, password: await password(flags, io) })
  io.stdout.write(`${token}\n`)
  io.stderr.write(`token for ${username}, valid ${expiresIn} s; use it with: export KEYGATE_TOKEN=<the token>\n`)
}

async function register (flags: Flags, io: ClientIo): Promise<void> {
  const file = keyFile(flags, io.env)
  const privateKey = await readPrivateKey(file)
  const name = flags.name ?? basename(file).replace(/\.pem$/, '')
  const token = await bearerToken(flags, io)
  // "a,b": no scope holds a comma; "" asks for a key with no scopes
  const scopes = flags.scopes?.split(',').filter((scope) => scope !== '')
  const registered = await registerKey({ baseUrl: baseUrl(flags, io.env), token, name, privateKey, scopes })
  const saved = apiKeyFile(file)
  await writeFile(saved, `${registered.apiKey}\n`, { mode: 0o600 })
  io.stdout.write(`${registered.apiKey}\n`)
  const granted = registered.scopes === undefined ? '' : `, scopes: ${registered.scopes.length === 0 ? 'none' : registered.scopes.join(' ')}`
  io.stderr.write(`key ${JSON.stringify(registered.name)} registered${granted}; apiKey saved to ${saved}\n`)
}

/** Bytes as a person can read them: JSON-style escapes, so a newline shows as \n. */
export function escapeBytes (data: Uint8Array): string {
  const bytes = Buffer.from(data.buffer, data.byteOffset, data.byteLength)
  let text: string
  try {
    // ignoreBOM: keep a byte order mark (a classic invisible difference) rather than drop it
    text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(bytes)
  } catch {
    // Not UTF-8: latin1 keeps one character per byte, and every non-ASCII one shows as \xNN.
    text = bytes.toString('latin1')
    return '"' + [...text].map((c) => {
      const code = c.charCodeAt(0)
      return code >= 0x20 && code < 0x7f ? (c === '"' || c === '\\' ? `\\${c}` : c) : `\\x${code.toString(16).padStart(2, '0')}`
    }).join('') + '"'
  }
  // JSON.stringify escapes control characters; invisible ones (BOM, no-break and zero-width spaces) too.
  return JSON.stringify(text).replace(/[\u00a0\u200b-\u200f\u2028\u2029\ufeff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
}

async function readBody (arg: string | undefined, io: ClientIo): Promise<Buffer | undefined> {
  if (arg === undefined) return undefined
  if (arg === '@-') {
    const chunks: Buffer[] = []
    for await (const chunk of io.stdin) chunks.push(Buffer.from(chunk as Buffer))
    return Buffer.concat(chunks)
  }
  if (arg.startsWith('@')) {
    try {
      return await readFile(arg.slice(1))
    } catch {
      throw new ClientUsageError(`cannot read the body file ${arg.slice(1)}`)
    }
  }
  return Buffer.from(arg, 'utf8')
}

function headerPairs (raw: string[] | undefined): Array<[string, string]> {
  return (raw ?? []).map((line) => {
    const colon = line.indexOf(':')
    if (colon <= 0) throw new ClientUsageError(`-H ${JSON.stringify(line)}: write headers as "Name: value"`)
    return [line.slice(0, colon).trim(), line.slice(colon + 1).trim()]
  })
}

function signatureScheme (flags: Flags): SignatureScheme {
  const scheme = flags.scheme ?? 'seed'
  if (scheme !== 'seed' && scheme !== 'rfc9421') throw new ClientUsageError(`--scheme ${JSON.stringify(scheme)}: give seed (X-API-* headers) or rfc9421`)
  if (flags.components !== undefined && scheme !== 'rfc9421') throw new ClientUsageError('--components is for --scheme rfc9421')
  return scheme
}

function coveredTarget (flags: Flags): CoveredTarget | undefined {
  const components = flags.components
  if (components === undefined || components === 'target-uri' || components === 'path') return components
  throw new ClientUsageError(`--components ${JSON.stringify(components)}: give target-uri (cover @target-uri, the default) or path ` +
    '(cover @path and @query: behind a proxy that rewrites Host)')
}

async function call (flags: Flags, positionals: string[], io: ClientIo): Promise<void> {
  const [method = '', target = '', bodyArg] = positionals
  const privateKey = await readPrivateKey(keyFile(flags, io.env))
  const body = await readBody(bodyArg, io)
  const token = await bearerToken(flags, io)
  const scheme = signatureScheme(flags)
  const client = createClient({ baseUrl: baseUrl(flags, io.env), token, privateKey, scheme, components: coveredTarget(flags) })
  const { response, signingString, headers } = await client.send(method, target, body, { headers: headerPairs(flags.header) })
  if (flags.verbose === true) {
    if (scheme === 'rfc9421') {
      io.stderr.write(`* signature base (${signingString.length} bytes):\n`)
      for (const line of Buffer.from(signingString).toString('utf8').split('\n')) io.stderr.write(`*   ${line}\n`)
    } else {
      const shown = signingString.length > VERBOSE_SIGNING_STRING_BYTES
        ? `${escapeBytes(signingString.subarray(0, VERBOSE_SIGNING_STRING_BYTES))}... (${signingString.length - VERBOSE_SIGNING_STRING_BYTES} more bytes)`
        : escapeBytes(signingString)
      io.stderr.write(`* signing string (${signingString.length} bytes): ${shown}\n`)
    }
    io.stderr.write(`> ${method.toUpperCase()} ${target}\n`)
    for (const [name, value] of Object.entries(headers)) {
      // The token is a credential: enough of it to tell tokens apart, not enough to use it.
      const shownValue = name === 'authorization' ? `${value.slice(0, 'Bearer '.length + 10)}...(redacted)` : value
      io.stderr.write(`> ${name}: ${shownValue}\n`)
    }
  }
  const answer = Buffer.from(await response.arrayBuffer())
  io.stderr.write(`${flags.verbose === true ? '< ' : ''}${response.status} ${response.statusText}\n`)
  io.stdout.write(answer)
  if (answer.length > 0 && answer[answer.length - 1] !== 0x0a) io.stdout.write('\n')
  if (response.status >= 400) {
    await explainInvalidSignature(answer, headers, scheme === 'rfc9421' ? signingString : undefined, body, method, target, io)
    throw new RequestFailed()
  }
}

/** On INVALID_SIGNATURE, which members of keygate's answer differ from what this CLI signed. */
async function explainInvalidSignature (
  answer: Buffer,
  headers: Record<string, string>,
  signatureBase: Uint8Array | undefined,
  body: Buffer | undefined,
  method: string,
  target: string,
  io: ClientIo
): Promise<void> {
  let problem: Record<string, unknown>
  try {
    problem = JSON.parse(answer.toString('utf8')) as Record<string, unknown>
  } catch {
    return
  }
  if (problem.code !== 'INVALID_SIGNATURE') return
  if (signatureBase !== undefined) {
    const base = Buffer.from(signatureBase).toString('utf8')
    const mineBase = { signatureBase: base.split('\n'), signatureBaseSha256: createHash('sha256').update(base).digest('hex') }
    if (problem.signatureBase === undefined && problem.signatureBaseSha256 === undefined) return
    const differ = signatureBaseMismatches(mineBase, problem)
    io.stderr.write(differ.mine.length === 0 && differ.keygate.length === 0
      ? 'keygate verified the very signature base this CLI signed: the key named by keyid is not the one that signed\n'
      : `keygate verified another signature base than this CLI signed;\n${differ.mine.map((line) => `  signed:   ${line}\n`).join('')}` +
        differ.keygate.map((line) => `  verified: ${line}\n`).join(''))
    return
  }
  const mine = await describeSigningString(headers['x-api-timestamp'] ?? '', method.toUpperCase(), target, body)
  const differ = signatureMismatches(mine, problem)
  io.stderr.write(differ.length === 0
    ? `keygate verified the very signing string this CLI signed: the key registered as ${headers['x-api-key'] ?? ''} is not the one that signed\n`
    : `keygate verified another signing string than this CLI signed; differing: ${differ.join(', ')}\n`)
}

export async function runClientCommand (command: ClientCommand, args: string[], io: ClientIo, usage: string): Promise<void> {
  const { flags, positionals } = parse(command, args, usage)
  try {
    switch (command) {
      case 'keygen': return await keygen(flags, io)
      case 'login': return await loginCommand(flags, io)
      case 'register': return await register(flags, io)
      case 'call': return await call(flags, positionals, io)
    }
  } catch (err) {
    if (err instanceof SigningInputError) throw new ClientUsageError(err.message)
    if (err instanceof KeygateResponseError) {
      io.stderr.write(`${err.message}\n`)
      throw new RequestFailed()
    }
    // fetch's network failures are all "fetch failed"; the cause says which.
    if (err instanceof TypeError && err.message === 'fetch failed') {
      const cause = (err as Error & { cause?: { message?: string; code?: string } }).cause
      throw new Error(`cannot reach ${baseUrl(flags, io.env)} (${cause?.code ?? cause?.message ?? 'network error'}): ` +
        `is keygate running (\`${keygateCommand()} demo\` runs one)? Set --url or KEYGATE_URL`)
    }
    throw err
  }
}
