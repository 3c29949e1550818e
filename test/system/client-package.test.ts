// @keygate/client as a client developer gets it: built, packed by npm, installed from the tarball
// into an empty project outside this repository, and run by plain Node.js (no TypeScript loader, no
// keygate-source condition: the tarball's dist/) against a real gateway, from an ES module and
// from CommonJS, on the Node.js that runs the tests and on an older one when the machine has one
// (Node.js 20, which client programs may still run). Then its declarations, compiled by a consumer
// with TypeScript's default libraries and no @types/node, and by one with @types/node and no DOM;
// and the README's quick start, compiled strict as a CommonJS project (moduleResolution node10,
// which reads package.json's top-level types, not its exports) and as an ES module (nodenext).
// Each compilation is `tsc -p CONFIG` in the project's folder, run in this process
// (helpers/tsc.ts: what tsc reports, its exit status and its output to a pipe, without a process
// each parsing TypeScript's libraries again); the last test checks it against the real tsc.
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { docSnippet } from '../helpers/docs.js'
import { otherNode, packed as packedOf } from '../helpers/packages.js'
import { addUser, PASSWORD, startStack } from '../helpers/stack.js'
import { inProcessTsc, processTsc } from '../helpers/tsc.js'

// npm pack and install, four Node.js runs and six TypeScript compilations on a shared 2-core machine
t.setTimeout(600_000)

const root = fileURLToPath(new URL('../..', import.meta.url))
const run = promisify(execFile)
/** `tsc -p config` in a folder: { code, out }, tsc's exit status and what it prints */
const tsc = inProcessTsc()
const MAX_TARBALL_BYTES = 100 * 1024
/** What the children see: no NODE_OPTIONS (no keygate-source condition, no tsx), nothing of this checkout. */
const childEnv = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir() }

/** The value exports of @keygate/client; consumer.ts below uses each, and the test checks this list against the built module. */
const VALUE_EXPORTS = [
  'KeygateResponseError', 'SigningInputError', 'apiKeyOf', 'createClient', 'describeRequest', 'describeSigningString', 'importPrivateKey',
  'keyRegistration', 'login', 'registerKey', 'signKeyName', 'signRequest', 'signatureMismatches', 'signingString',
  'describeSignatureBase', 'keyTypeOf', 'signatureBaseMismatches', 'checkForwardedDigest', 'FORWARDED_DIGEST_HEADER',
  'accessTokenHash', 'dpopProof', 'dpopThumbprint', 'generateDpopKey', 'withDpopProof'
]

const scratch = mkdtempSync(join(tmpdir(), 'keygate-client-package-'))
t.teardown(() => { rmSync(scratch, { recursive: true, force: true }) })
const project = join(scratch, 'consumer')
let tarball = ''

t.test('built and packed: a small tarball of JavaScript, declarations and the README, with no dependencies', async (t) => {
  // built and packed from a copy of the checkout (helpers/build.ts): the checkout is not written to
  const packed = await packedOf('@keygate/client')
  tarball = packed.path
  const size = statSync(tarball).size
  t.ok(size < MAX_TARBALL_BYTES, `the tarball is ${size} bytes, under ${MAX_TARBALL_BYTES}`)
  const files = [...packed.files].sort()
  t.ok(files.includes('dist/index.js') && files.includes('dist/index.d.ts') && files.includes('dist/protocol/index.js'), 'it holds the built module')
  t.ok(files.includes('README.md'), 'and the README')
  t.same(files.filter((file) => !/^dist\/.*\.(js|d\.ts)$/.test(file) && file !== 'README.md' && file !== 'package.json'), [],
    'nothing but dist/*.js, dist/*.d.ts, README.md and package.json')
  t.same(files.filter((file) => /\.ts$/.test(file) && !file.endsWith('.d.ts')), [], 'no TypeScript source')
  t.same(files.filter((file) => /(^|\/)(test|tests|__tests__)\/|\.(test|spec)\./.test(file)), [], 'no test')

  const unpacked = join(scratch, 'unpacked')
  mkdirSync(unpacked)
  await run('tar', ['-xzf', tarball, '-C', unpacked])
  const manifest = JSON.parse(readFileSync(join(unpacked, 'package/package.json'), 'utf8')) as Record<string, unknown>
  for (const field of ['dependencies', 'peerDependencies', 'optionalDependencies', 'bundleDependencies']) {
    t.equal(manifest[field], undefined, `package.json has no ${field}`)
  }
  t.equal(manifest.type, 'module')
})

t.test('installed into an empty project, it is all node_modules holds', async (t) => {
  mkdirSync(project)
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', version: '1.0.0', private: true, type: 'module' }))
  // --offline with an empty cache of its own: the tarball is all there is to install
  const env = { ...childEnv, npm_config_cache: join(scratch, 'npm-cache') }
  await run('npm', ['install', tarball, '--no-audit', '--no-fund', '--offline'], { cwd: project, env })
  t.same(readdirSync(join(project, 'node_modules')).filter((name) => !name.startsWith('.')), ['@keygate'])
  t.same(readdirSync(join(project, 'node_modules/@keygate')), ['client'])
  const script = 'console.log(JSON.stringify(Object.keys(await import("@keygate/client")).sort()))'
  const exported = await run(process.execPath, ['--input-type=module', '-e', script], { cwd: project, env: childEnv })
  t.same(JSON.parse(exported.stdout), [...VALUE_EXPORTS].sort(), 'the built module exports exactly what consumer.ts uses')
})

const ESM_SCRIPT = `import { generateKeyPairSync } from 'node:crypto'
import { apiKeyOf, createClient, login, registerKey, SigningInputError } from '@keygate/client'

const [baseUrl, password, taxId] = process.argv.slice(2)
const pem = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs1', format: 'pem' })
const { token } = await login({ baseUrl, username: 'alice', password })
const registered = await registerKey({ baseUrl, token, name: 'esm ' + process.version, privateKey: pem })
const client = createClient({ baseUrl, token, privateKey: pem })
const created = await client.fetch('POST', '/v1/clients/', JSON.stringify({ name: 'Ada Lovelace', email: 'ada@example.com', tax_id: taxId }))
const createdBody = await created.json()
const fetched = await client.fetch('GET', '/v1/clients/' + createdBody.id)
let refused
try {
  createClient({ baseUrl, token, privateKey: 'not a key' })
} catch (err) {
  refused = err instanceof SigningInputError ? err.input : String(err)
}
console.log(JSON.stringify({
  version: process.version,
  apiKey: registered.apiKey === await client.apiKey() && registered.apiKey === await apiKeyOf(pem),
  created: created.status,
  createdBody,
  fetched: fetched.status,
  fetchedBody: await fetched.json(),
  refused
}))
`

const CJS_SCRIPT = `const { generateKeyPairSync } = require('node:crypto')
const { createClient, login, registerKey } = require('@keygate/client')

async function main () {
  const [baseUrl, password, taxId] = process.argv.slice(2)
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const { token } = await login({ baseUrl, username: 'alice', password })
  const registered = await registerKey({ baseUrl, token, name: 'cjs ' + process.version, privateKey })
  const client = createClient({ baseUrl, token, privateKey })
  const created = await client.fetch('POST', '/v1/clients/', JSON.stringify({ name: 'Ada Lovelace', email: 'ada@example.com', tax_id: taxId }))
  const createdBody = await created.json()
  const fetched = await client.fetch('GET', '/v1/clients/' + createdBody.id)
  console.log(JSON.stringify({
    version: process.version,
    apiKey: registered.apiKey === await client.apiKey(),
    created: created.status,
    createdBody,
    fetched: fetched.status,
    fetchedBody: await fetched.json()
  }))
}
main().catch((err) => { console.error(err); process.exit(1) })
`

t.test('plain Node.js scripts, ESM and CommonJS, log in, register a key and send signed requests to a real gateway', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  await addUser(gw, 'alice')
  writeFileSync(join(project, 'sign.mjs'), ESM_SCRIPT)
  writeFileSync(join(project, 'sign.cjs'), CJS_SCRIPT)

  const older = await otherNode()
  const nodes = [{ path: process.execPath, version: process.version }]
  if (older === undefined) {
    t.pass(`NO second Node.js on PATH (only ${process.version}): the client was NOT run on an older Node.js`)
  } else if (Number(/^v(\d+)/.exec(older.version)?.[1]) < 20) {
    t.pass(`the other Node.js on PATH, ${older.path}, is ${older.version}, older than the client supports (20): NOT run on it`)
  } else {
    nodes.push(older)
  }
  let taxId = 10_000_000
  for (const node of nodes) {
    for (const script of ['sign.mjs', 'sign.cjs']) {
      const id = String(taxId++)
      const { stdout, stderr } = await run(node.path, [script, gw.url, PASSWORD, id], { cwd: project, env: childEnv })
      const out = JSON.parse(stdout) as Record<string, unknown>
      const label = `${script} on Node.js ${node.version}`
      t.equal(out.version, node.version, `${label}: runs on that Node.js`)
      t.equal(out.apiKey, true, `${label}: the apiKey registration returned is the key's own`)
      t.equal(out.created, 201, `${label}: the signed POST /v1/clients/ is accepted and creates the client`)
      t.match(out.createdBody, { id: String, name: 'Ada Lovelace', email: 'ada@example.com', tax_id: id }, `${label}: the created client`)
      t.equal(out.fetched, 200, `${label}: the signed GET /v1/clients/{id} is accepted`)
      t.same(out.fetchedBody, out.createdBody, `${label}: and answers the created client`)
      if (script === 'sign.mjs') t.equal(out.refused, 'privateKey', `${label}: a mistake is a SigningInputError naming the input`)
      t.notMatch(stderr, /Error/, `${label}: no error on stderr`)
    }
  }
})

const COMMON_TS = `import {
  apiKeyOf, createClient, describeRequest, describeSigningString, importPrivateKey, KeygateResponseError, keyRegistration, login, registerKey,
  signatureMismatches, signingString, signKeyName, signRequest, SigningInputError,
  type ClientOptions, type ClientRequestInit, type CryptoKeyLike, type FetchFunction, type KeygateClient, type KeyInput, type KeyObjectLike,
  type KeyRegistrationBody, type LoginInput, type PrivateKeyInput, type RegisterKeyInput, type RequestBody, type SignatureHeaders,
  type SignedResponseInfo, type SigningStringDetails, type SignRequestInput,
  describeSignatureBase, keyTypeOf, signatureBaseMismatches, type CoveredTarget, type KeyType, type MessageSignatureAlgorithm,
  type MessageSignatureHeaders, type MessageSignatureInput, type SignatureBaseDetails, type SignatureScheme,
  checkForwardedDigest, FORWARDED_DIGEST_HEADER, type ContentDigestAlgorithm, type ForwardedDigestCheck, type ForwardedDigestProblem,
  type ForwardedHeaders, accessTokenHash, dpopProof, dpopThumbprint, generateDpopKey, withDpopProof, type DpopAlgorithm, type DpopKeyPair,
  type DpopProofInput, type LoginResult
} from '@keygate/client'
import { API_KEY_PATTERN, HTTP_METHODS, requestTargetProblem, type HttpMethod } from '@keygate/client/protocol'

export async function everything (baseUrl: string, pem: string, key: PrivateKeyInput, publicKey: KeyInput): Promise<string[]> {
  const loginInput: LoginInput = { baseUrl, username: 'alice', password: 'secret' }
  const { token, expiresIn }: { token: string; expiresIn: number } = await login(loginInput)
  const registration: RegisterKeyInput = { baseUrl, token, name: 'laptop', privateKey: pem, publicKey }
  const { apiKey } = await registerKey(registration)
  const body: RequestBody = new Uint8Array([123, 125])
  const input: SignRequestInput = { method: 'POST', target: '/v1/clients/', body, apiKey, privateKey: key, timestamp: Date.now() }
  const headers: SignatureHeaders = await signRequest(input)
  const imported: CryptoKeyLike = await importPrivateKey(pem)
  const registrationBody: KeyRegistrationBody = await keyRegistration('laptop', imported, publicKey)
  const signature: string = await signKeyName('laptop', pem)
  const ownApiKey: string = await apiKeyOf(publicKey)
  const myFetch: FetchFunction = async (url, init) => await fetch(url, init)
  const options: ClientOptions = { baseUrl, token, privateKey: imported, apiKey: ownApiKey, fetch: myFetch }
  const client: KeygateClient = createClient(options)
  const init: ClientRequestInit = { headers: { 'x-trace': '1' } }
  const response: Response = await client.fetch('GET', '/v1/clients/', null, init)
  const sent: { response: Response } & SignedResponseInfo = await client.send('POST', '/v1/clients/', new ArrayBuffer(2), init)
  const bytes: Uint8Array = sent.signingString
  const parts: Uint8Array[] = signingString('1790000000000', 'GET', '/', undefined)
  const mine: SigningStringDetails = await describeRequest({ method: 'GET', target: '/', timestamp: 1790000000000 })
  const described: SigningStringDetails = await describeSigningString('1790000000000', 'GET', '/', bytes)
  const problem = await response.json() as Record<string, unknown>
  const differing: string[] = signatureMismatches(mine, problem)
  const method: HttpMethod = HTTP_METHODS[0]
  const errors: Error[] = [new SigningInputError('target', 'x'), new KeygateResponseError(401, { code: 'INVALID_SIGNATURE' })]
  const notes: Array<string | undefined> = [(errors[0] as SigningInputError).input, (errors[1] as KeygateResponseError).code]
  const keyObject: KeyObjectLike | undefined = undefined
  const scheme: SignatureScheme = 'rfc9421'
  const components: CoveredTarget = 'path'
  const algorithm: MessageSignatureAlgorithm = 'ed25519'
  const messageInput: MessageSignatureInput = { scheme, method: 'POST', target: '/v1/clients/', body, apiKey, privateKey: key, baseUrl, components }
  const messageHeaders: MessageSignatureHeaders = await signRequest(messageInput)
  const base: SignatureBaseDetails = await describeSignatureBase({ method: 'GET', target: '/', apiKey, baseUrl, algorithm, created: 1790000000, nonce: 'n' })
  const baseDiffer: { mine: string[]; keygate: string[] } = signatureBaseMismatches(base, problem)
  const keyType: KeyType = keyTypeOf(publicKey)
  const forwarded: ForwardedHeaders = { [FORWARDED_DIGEST_HEADER]: 'sha-256=:x:', 'x-list': ['a', 'b'], absent: undefined }
  const check: ForwardedDigestCheck = await checkForwardedDigest(forwarded, body)
  const reason: ForwardedDigestProblem | undefined = check.ok ? undefined : check.reason
  const algorithms: ContentDigestAlgorithm[] = check.ok && check.checked ? check.algorithms : []
  const dpopAlgorithm: DpopAlgorithm = 'EdDSA'
  const dpop: DpopKeyPair = await generateDpopKey(dpopAlgorithm)
  const bound: LoginResult = await login({ ...loginInput, dpop })
  const proofInput: DpopProofInput = { keyPair: dpop, method: 'GET', url: new URL('/v1/clients/', baseUrl), accessToken: bound.token, nonce: 'n' }
  const proof: string = await dpopProof(proofInput)
  const retried: Response = await withDpopProof(dpop, 'GET', new URL(baseUrl), bound.token, async (p) => await fetch(baseUrl, { headers: { dpop: p } }))
  const dpopClient: KeygateClient = createClient({ ...options, token: bound.token, dpop })
  differing.push(proof, await dpopThumbprint(dpop), await accessTokenHash(bound.token), bound.tokenType, String(retried.status), typeof dpopClient)
  differing.push(messageHeaders.Signature, ...baseDiffer.mine, keyType, String(reason), ...algorithms)
  return [String(expiresIn), headers['X-API-Signature'], registrationBody.publicKey, signature, await client.apiKey(), described.target, method,
    String(API_KEY_PATTERN.test(apiKey)), String(requestTargetProblem('/')), String(parts.length), ...differing, ...notes.map(String), String(keyObject)]
}
`

const BROWSER_TS = `import { checkForwardedDigest } from '@keygate/client'
import { everything } from './common.js'

// TypeScript's default libraries (the DOM's CryptoKey, no Node.js): a WebCrypto key pair.
const pair = await crypto.subtle.generateKey(
  { name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, false, ['sign', 'verify'])
const key: CryptoKey = pair.privateKey
console.log(await everything('http://127.0.0.1:8080', '-----BEGIN PRIVATE KEY-----', key, pair.publicKey))
// fetch's Headers and an ArrayBuffer, as a service on fetch's API has them
console.log(await checkForwardedDigest(new Headers(), new ArrayBuffer(0)))
`

const NODE_TS = `import { generateKeyPairSync, webcrypto } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { IncomingHttpHeaders } from 'node:http'
import { checkForwardedDigest } from '@keygate/client'
import { everything } from './common.js'

// @types/node, no DOM: a KeyObject, a Buffer of PEM, and Node.js's WebCrypto key.
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
console.log(await everything('http://127.0.0.1:8080', 'pem', privateKey, publicKey))
console.log(await everything('http://127.0.0.1:8080', 'pem', readFileSync('key.pem'), readFileSync('key.pub.pem')))
const pair = await webcrypto.subtle.generateKey(
  { name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }, false, ['sign', 'verify'])
console.log(await everything('http://127.0.0.1:8080', 'pem', pair.privateKey, pair.publicKey))
// a Node.js server's req.headers and a Buffer
const headers: IncomingHttpHeaders = { 'x-keygate-content-digest': 'sha-256=:x:' }
console.log(await checkForwardedDigest(headers, readFileSync('body')))
`

t.test('the declarations compile in a TypeScript project with the default libraries and no @types/node, and in one with @types/node and no DOM',
  async (t) => {
    const ts = join(project, 'ts')
    mkdirSync(ts)
    writeFileSync(join(ts, 'common.ts'), COMMON_TS)
    writeFileSync(join(ts, 'browser.ts'), BROWSER_TS)
    writeFileSync(join(ts, 'node.ts'), NODE_TS)
    const options = { strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', noEmit: true }
    writeFileSync(join(ts, 'tsconfig.default-libs.json'), JSON.stringify({ compilerOptions: { ...options, types: [] }, files: ['common.ts', 'browser.ts'] }))
    writeFileSync(join(ts, 'tsconfig.node.json'), JSON.stringify({
      compilerOptions: { ...options, lib: ['ES2022'], types: ['node'] },
      files: ['common.ts', 'node.ts']
    }))
    const compile = (config: string): { code: number; out: string } => tsc(ts, config)

    const defaultLibs = compile('tsconfig.default-libs.json')
    t.same(defaultLibs, { code: 0, out: '' }, 'default libraries (DOM), types: [] (no @types/node): tsc exits 0')

    // @types/node from this checkout (it brings undici-types, which it resolves beside its real path)
    mkdirSync(join(project, 'node_modules/@types'))
    symlinkSync(join(root, 'node_modules/@types/node'), join(project, 'node_modules/@types/node'), 'dir')
    const nodeTypes = compile('tsconfig.node.json')
    t.same(nodeTypes, { code: 0, out: '' }, 'lib ["ES2022"] (no DOM) with @types/node: tsc exits 0')

    // The check checks: a misuse of the API (the apiKey used without await) is an error under both
    // (each config's second run: as tsc --incremental runs again after the edit, helpers/tsc.ts)
    writeFileSync(join(ts, 'common.ts'), `${COMMON_TS}\nexport const wrong: string = apiKeyOf('pem')\n`)
    for (const config of ['tsconfig.default-libs.json', 'tsconfig.node.json']) {
      const broken = compile(config)
      t.not(broken.code, 0, `${config}: a Promise<string> where a string is due fails`)
      t.match(broken.out, /common\.ts.*error TS2322/, `${config}: and tsc says where`)
    }
  })

t.test('the README\'s quick start compiles, strict, in a CommonJS project (node10 resolution) and in an ES module one (nodenext)', async (t) => {
  // after the test above, which linked @types/node into the project (the quick start reads process.env)
  const dir = join(project, 'quick-start')
  mkdirSync(dir)
  writeFileSync(join(dir, 'quick-start.ts'), docSnippet('client/README.md', 'Quick start', 'js'))
  // the subpath too: node10 knows no exports map, typesVersions points it at the types
  writeFileSync(join(dir, 'protocol.ts'), "import { pathOf } from '@keygate/client/protocol'\nexport const path: string = pathOf('/v1/clients/?limit=1')\n")
  const resolutions = {
    'node10 (module commonjs)': { module: 'commonjs', moduleResolution: 'node10' },
    nodenext: { module: 'nodenext', moduleResolution: 'nodenext' }
  }
  for (const [name, options] of Object.entries(resolutions)) {
    const config = `tsconfig.${options.moduleResolution}.json`
    writeFileSync(join(dir, config), JSON.stringify({
      compilerOptions: { ...options, strict: true, target: 'es2022', types: ['node'], noEmit: true },
      files: ['quick-start.ts', 'protocol.ts']
    }))
    const compiled = tsc(dir, config)
    t.same(compiled, { code: 0, out: '' }, `${name}: tsc finds @keygate/client, @keygate/client/protocol and their types, and exits 0`)
  }
})

t.test('the compilations above report what the real tsc reports: its exit status and its output, for a project with errors', async (t) => {
  // small and without TypeScript's libraries (noLib), so the real tsc costs little. tsconfig.json:
  // an unknown option and a file that is not there, and the globals noLib leaves out (tsc then
  // checks no file). tsconfig.globals.json declares those globals: the file's errors, a missing
  // module and a type error under strict; then again after an edit (a config's second run)
  const dir = join(scratch, 'tsc-check')
  mkdirSync(dir)
  writeFileSync(join(dir, 'wrong.ts'), "import { missing } from './missing.js'\nexport const n: number = 'one'\nexport const m = missing\n")
  const globals = ['Array', 'Boolean', 'CallableFunction', 'Function', 'IArguments', 'NewableFunction', 'Number', 'Object', 'RegExp', 'String']
  writeFileSync(join(dir, 'globals.d.ts'), globals.map((name) => `interface ${name}${name === 'Array' ? '<T>' : ''} {}\n`).join(''))
  const options = { noLib: true, noEmit: true, strict: true, module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022' }
  writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify({ compilerOptions: { ...options, notAnOption: true }, files: ['wrong.ts', 'gone.ts'] }))
  writeFileSync(join(dir, 'tsconfig.globals.json'), JSON.stringify({ compilerOptions: options, files: ['globals.d.ts', 'wrong.ts'] }))
  const compare = async (config: string, what: RegExp): Promise<void> => {
    const [mine, real] = [tsc(dir, config), await processTsc(dir, config)]
    t.match(real.out, what, `${config}: tsc reports ${String(what)}`)
    t.same(mine, real, `${config}: the same exit status and output as tsc -p ${config}`)
  }
  await compare('tsconfig.json', /error TS2318[^]*error TS6053[^]*error TS5023/)
  await compare('tsconfig.globals.json', /wrong\.ts\(1,25\): error TS2307[^]*wrong\.ts\(2,14\): error TS2322/)
  writeFileSync(join(dir, 'wrong.ts'), 'export const n: number = 1\nexport const s: string = n\n')
  await compare('tsconfig.globals.json', /^wrong\.ts\(2,14\): error TS2322[^\n]*\n$/)
})
