// @keygate/client as this repository's code imports it (by its package name, which resolves to its
// sources under the keygate-source condition), and login, registerKey and createClient's fetch
// against a real gateway and example service. The built package, installed in another project and
// run by Node.js 20 and 24 and by a browser: test/system/client-package.test.ts and client-browser.test.ts.
import { generateKeyPairSync, webcrypto, type KeyObject } from 'node:crypto'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { apiKeyOf, createClient, KeygateResponseError, login, registerKey, SigningInputError } from '@keygate/client'
import * as direct from '../../../client/src/index.js'
import { addUser, PASSWORD, startStack } from '../../helpers/stack.js'
import { rejection } from '../../helpers/rejection.js'

/** The error `fn` throws synchronously. */
function thrown (fn: () => unknown): unknown {
  try {
    fn()
  } catch (err) {
    return err
  }
  throw new Error('expected an error')
}

const root = fileURLToPath(new URL('../../..', import.meta.url))

t.test('"@keygate/client", under the keygate-source condition, is the client\'s source module', async (t) => {
  t.equal(createClient, direct.createClient)
  t.equal(import.meta.resolve('@keygate/client'), new URL('client/src/index.ts', `file://${root}`).href)
  t.equal(import.meta.resolve('@keygate/client/protocol'), new URL('client/src/protocol/index.ts', `file://${root}`).href)
})

t.test('login, registerKey and a client\'s fetch against a real gateway', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  await addUser(gw, 'alice')
  const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 })
  const apiKey = await apiKeyOf(privateKey)

  const { token, expiresIn } = await login({ baseUrl: gw.url, username: 'alice', password: PASSWORD })
  t.equal(expiresIn, 900)
  const registered = await registerKey({ baseUrl: gw.url, token, name: 'laptop', privateKey })
  t.match(registered, { message: String, apiKey, name: 'laptop' })
  const duplicate = await rejection(() => registerKey({ baseUrl: gw.url, token, name: 'again', privateKey }))
  t.ok(duplicate instanceof KeygateResponseError)
  t.match(duplicate, { status: 409, code: 'DUPLICATE_KEY' }, 'a second registration: DUPLICATE_KEY')
  t.match(await rejection(() => login({ baseUrl: gw.url, username: 'alice', password: 'wrong password' })), { status: 401, code: 'INVALID_CREDENTIALS' })

  const client = createClient({ baseUrl: `${gw.url}/`, token, privateKey })
  t.equal(await client.apiKey(), registered.apiKey, 'the apiKey defaults to the key\'s own')
  const body = '{"name":"Ada Lovelace","email":"ada@example.com","tax_id":"12345678"}'
  const created = await client.fetch('POST', '/v1/clients/', body)
  t.equal(created.status, 201, 'POST: signed and sent')
  const bytes = await client.fetch('post', '/v1/clients/', Buffer.from('{"name":"Zoë","email":"z@example.com","tax_id":"87654321"}'))
  t.equal(bytes.status, 201, 'a Buffer body and a lower-case method')
  const arrayBuffer = new TextEncoder().encode('{"name":"Ada","email":"ada@example.com","tax_id":"11223344"}').buffer
  t.equal((await client.fetch('POST', '/v1/clients/', arrayBuffer)).status, 201, 'an ArrayBuffer body')
  const listed = await client.fetch('GET', '/v1/clients/?limit=1')
  t.equal(listed.status, 200, 'a query string is signed')
  const page = await listed.json() as { items: Array<{ name: string }>; next_cursor: string | null }
  t.equal(page.items.length, 1)
  t.type(page.next_cursor, 'string')

  const { response, signingString, headers } = await client.send('GET', '/v1/clients/', undefined, { headers: { 'x-trace': 'abc' } })
  t.equal(response.status, 200)
  t.ok(signingString instanceof Uint8Array && !Buffer.isBuffer(signingString), 'the signing string is a Uint8Array')
  t.match(new TextDecoder().decode(signingString), /^\d{13}GET\/v1\/clients\/$/)
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

  // A non-extractable CryptoKey: its apiKey cannot be computed, so it is given; its public half is registered.
  const algorithm = { name: 'RSASSA-PKCS1-v1_5', modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: 'SHA-256' }
  const pair = await webcrypto.subtle.generateKey(algorithm, false, ['sign', 'verify'])
  const second = await registerKey({ baseUrl: gw.url, token, name: 'webcrypto', privateKey: pair.privateKey, publicKey: pair.publicKey })
  t.equal(second.apiKey, await apiKeyOf(pair.publicKey), 'a CryptoKey pair registers, with the public half given')
  const webClient = createClient({ baseUrl: gw.url, token, privateKey: pair.privateKey, apiKey: second.apiKey })
  t.equal((await webClient.fetch('GET', '/v1/clients/?limit=1')).status, 200, 'and signs')
  t.match(thrown(() => createClient({ baseUrl: gw.url, token, privateKey: pair.privateKey })), { input: 'apiKey', message: /non-extractable CryptoKey/ },
    'without its apiKey, createClient says at once that it is needed')

  const mistakes: Array<[string, () => unknown, string]> = [
    ['a target fetch would re-encode', () => client.fetch('GET', "/v1/clients/?q='x'"), 'target'],
    ['an empty query fetch would drop', () => client.fetch('GET', '/v1/clients/?'), 'target'],
    ['a body in init', () => client.fetch('POST', '/v1/clients/', undefined, { body: '{}' } as RequestInit), 'init.body'],
    ['a base URL with a path', () => createClient({ baseUrl: `${gw.url}/api`, token, privateKey }), 'baseUrl'],
    ['not a URL', () => createClient({ baseUrl: 'localhost:8080', token, privateKey }), 'baseUrl'],
    ['no token', () => createClient({ baseUrl: gw.url, token: '', privateKey }), 'token'],
    ['an apiKey that is not one', () => createClient({ baseUrl: gw.url, token, privateKey, apiKey: 'ABC' }), 'apiKey'],
    ['a public key', () => createClient({ baseUrl: gw.url, token, privateKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).publicKey }), 'privateKey'],
    ['not a PEM', () => createClient({ baseUrl: gw.url, token, privateKey: 'not a key' }), 'privateKey'],
    ['a fetch that is not a function', () => createClient({ baseUrl: gw.url, token, privateKey, fetch: 'fetch' as unknown as typeof fetch }), 'fetch'],
    ['registerKey without a token', () => registerKey({ baseUrl: gw.url, token: '', name: 'x', privateKey }), 'token']
  ]
  const sync = ['a base URL with a path', 'not a URL', 'no token', 'an apiKey that is not one', 'a public key', 'not a PEM', 'a fetch that is not a function']
  for (const [label, fn, input] of mistakes) {
    const err = sync.includes(label) ? thrown(fn) : await rejection(fn)
    t.ok(err instanceof SigningInputError, `${label}: a SigningInputError${sync.includes(label) ? ', thrown by createClient at once' : ''}`)
    t.match(err, { input }, label)
  }
})

t.test('registerKey and keyRegistration with scopes', async (t) => {
  const gw = await startStack(t, { store: 'memory' })
  await gw.app.keygate.users.upsert('bob', PASSWORD, ['clients:read', 'clients:write'])
  const { token } = await login({ baseUrl: gw.url, username: 'bob', password: PASSWORD })
  const fresh = (): KeyObject => generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
  const narrow = await registerKey({ baseUrl: gw.url, token, name: 'reader', privateKey: fresh(), scopes: ['clients:read'] })
  t.same(narrow.scopes, ['clients:read'], 'the key has the scopes asked for')
  const all = await registerKey({ baseUrl: gw.url, token, name: 'all', privateKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey })
  t.same(all.scopes, ['clients:read', 'clients:write'], 'none asked: all of the user\'s')
  const refused = await rejection(() => registerKey({
    baseUrl: gw.url, token, name: 'admin', privateKey: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey, scopes: ['admin']
  }))
  t.match(refused, { status: 400, code: 'VALIDATION_FAILED' }, 'more than the user has: refused by keygate')
  const body = await direct.keyRegistration('k', generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey, undefined, { scopes: ['a'] })
  t.same(body.scopes, ['a'], 'the body carries them')
  t.equal('scopes' in await direct.keyRegistration('k', generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey), false, 'and nothing without')
  const err = await rejection(() => direct.keyRegistration('k', generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey, undefined,
    { scopes: 'a' as unknown as string[] }))
  t.ok(err instanceof SigningInputError, 'not a list: refused before anything is sent')
})
