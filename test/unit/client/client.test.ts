// keygate/client as another project uses it: imported by its package specifier (the package's
// self-reference here, a separate project in a temporary directory below), and createClient's
// fetch against a real gateway and example service.
import { execFile } from 'node:child_process'
import { generateKeyPairSync } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { createClient, KeygateResponseError, login, registerKey, signRequest, SigningInputError } from 'keygate/client'
import * as direct from '../../../client/src/index.js'
import { addUser, PASSWORD, startStack } from '../../helpers/stack.js'

/** The error `fn` throws or rejects with (a passing call fails the test). */
async function rejection (fn: () => unknown): Promise<unknown> {
  try {
    await fn()
  } catch (err) {
    return err
  }
  throw new Error('expected an error')
}

const root = fileURLToPath(new URL('../../..', import.meta.url))

t.test('"keygate/client" and "@keygate/client" resolve, through package.json exports, to the client module', async (t) => {
  t.equal(signRequest, direct.signRequest)
  t.equal(createClient, direct.createClient)
  t.equal(import.meta.resolve('keygate/client'), new URL('client/src/index.ts', `file://${root}`).href)
  t.equal(import.meta.resolve('@keygate/client'), new URL('client/src/index.ts', `file://${root}`).href, 'and so does the workspace package')
})

t.test('another project imports keygate/client and signs', async (t) => {
  const project = mkdtempSync(join(tmpdir(), 'keygate-consumer-'))
  t.teardown(() => { rmSync(project, { recursive: true, force: true }) })
  // What `npm install <path to keygate>` and `npm install tsx` leave in node_modules.
  mkdirSync(join(project, 'node_modules'))
  symlinkSync(root, join(project, 'node_modules', 'keygate'), 'dir')
  symlinkSync(join(root, 'node_modules', 'tsx'), join(project, 'node_modules', 'tsx'), 'dir')
  writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'consumer', type: 'module', private: true }))
  writeFileSync(join(project, 'sign.ts'), `
import { generateKeyPairSync, createVerify } from 'node:crypto'
import { apiKeyOf, signRequest } from 'keygate/client'
const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
const headers = signRequest({ method: 'POST', target: '/v1/clients/', body: '{}', apiKey: apiKeyOf(privateKey), privateKey, timestamp: 1790000000000 })
const ok = createVerify('sha256').update('1790000000000POST/v1/clients/{}').verify(publicKey, headers['X-API-Signature'], 'base64')
console.log(JSON.stringify({ names: Object.keys(headers), ok }))
`)
  const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'sign.ts'], { cwd: project, env: { PATH: process.env.PATH ?? '' } })
  t.same(JSON.parse(stdout), { names: ['X-API-Key', 'X-API-Timestamp', 'X-API-Signature'], ok: true })
})

t.test('login, registerKey and a client\'s fetch against a real gateway', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  await addUser(gw, 'alice')
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })

  const { token, expiresIn } = await login({ baseUrl: gw.url, username: 'alice', password: PASSWORD })
  t.equal(expiresIn, 900)
  const registered = await registerKey({ baseUrl: gw.url, token, name: 'laptop', privateKey })
  t.match(registered, { message: String, apiKey: direct.apiKeyOf(privateKey), name: 'laptop' })
  const duplicate = await rejection(() => registerKey({ baseUrl: gw.url, token, name: 'again', privateKey }))
  t.ok(duplicate instanceof KeygateResponseError)
  t.match(duplicate, { status: 409, code: 'DUPLICATE_KEY' }, 'a second registration: DUPLICATE_KEY')
  t.match(await rejection(() => login({ baseUrl: gw.url, username: 'alice', password: 'wrong password' })), { status: 401, code: 'INVALID_CREDENTIALS' })

  const client = createClient({ baseUrl: `${gw.url}/`, token, privateKey })
  t.equal(client.apiKey, registered.apiKey, 'the apiKey defaults to the key\'s own')
  const body = '{"name":"Ada Lovelace","email":"ada@example.com","tax_id":"12345678"}'
  const created = await client.fetch('POST', '/v1/clients/', body)
  t.equal(created.status, 201, 'POST: signed and sent')
  const bytes = await client.fetch('post', '/v1/clients/', Buffer.from('{"name":"Zoë","email":"z@example.com","tax_id":"87654321"}'))
  t.equal(bytes.status, 201, 'a Buffer body and a lower-case method')
  const listed = await client.fetch('GET', '/v1/clients/?limit=1')
  t.equal(listed.status, 200, 'a query string is signed')
  const page = await listed.json() as { items: Array<{ name: string }>; next_cursor: string | null }
  t.equal(page.items.length, 1)
  t.type(page.next_cursor, 'string')

  const { response, signingString, headers } = await client.send('GET', '/v1/clients/', undefined, { headers: { 'x-trace': 'abc' } })
  t.equal(response.status, 200)
  t.match(signingString.toString(), /^\d{13}GET\/v1\/clients\/$/)
  t.match(headers, { authorization: `Bearer ${token}`, 'x-api-key': registered.apiKey, 'x-trace': 'abc' })

  const stranger = createClient({
    baseUrl: gw.url,
    token,
    privateKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
    apiKey: registered.apiKey
  })
  const refused = await stranger.fetch('GET', '/v1/clients/')
  t.equal(refused.status, 401, 'another key with this apiKey: refused')
  t.match(await refused.json(), { code: 'INVALID_SIGNATURE', target: '/v1/clients/', apiKey: registered.apiKey })

  const mistakes: Array<[string, () => unknown, string]> = [
    ['a target fetch would re-encode', () => client.fetch('GET', "/v1/clients/?q='x'"), 'target'],
    ['an empty query fetch would drop', () => client.fetch('GET', '/v1/clients/?'), 'target'],
    ['a body in init', () => client.fetch('POST', '/v1/clients/', undefined, { body: '{}' } as RequestInit), 'init.body'],
    ['a base URL with a path', () => createClient({ baseUrl: `${gw.url}/api`, token, privateKey }), 'baseUrl'],
    ['not a URL', () => createClient({ baseUrl: 'localhost:8080', token, privateKey }), 'baseUrl'],
    ['no token', () => createClient({ baseUrl: gw.url, token: '', privateKey }), 'token']
  ]
  for (const [label, fn, input] of mistakes) {
    const err = await rejection(fn)
    t.ok(err instanceof SigningInputError, `${label}: a SigningInputError`)
    t.match(err, { input }, label)
  }
})
