// The README walkthrough, done with the openssl command line instead of our own code, so our
// signer and our verifier cannot share a mistake.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { send } from '../helpers/http.js'
import { STORE_KINDS, addUser, login, startStack } from '../helpers/stack.js'

function openssl (args: string[], input?: string | Buffer): Buffer {
  return execFileSync('openssl', args, { input, stdio: ['pipe', 'pipe', 'pipe'] })
}

for (const storeKind of STORE_KINDS) {
  t.test(`openssl-made keys and signatures, ${storeKind} store`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-openssl-'))
    t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
    const privatePem = join(dir, 'private.pem')
    openssl(['genpkey', '-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048', '-out', privatePem])
    const publicPem = openssl(['pkey', '-in', privatePem, '-pubout']).toString()
    const sign = (data: string): string => openssl(['dgst', '-sha256', '-sign', privatePem], data).toString('base64')
    const expectedApiKey = openssl(['dgst', '-sha256', '-r'], openssl(['pkey', '-pubin', '-outform', 'DER'], publicPem)).toString().split(' ')[0]

    const gw = await startStack(t, { store: storeKind })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')

    const registered = await send(gw.url, '/v1/api-keys', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ name: 'openssl key', publicKey: publicPem, signature: sign('openssl key') })
    })
    t.equal(registered.status, 201)
    const apiKey = registered.json<{ apiKey: string }>().apiKey
    t.equal(apiKey, expectedApiKey, 'apiKey is the SHA-256 of the DER SubjectPublicKeyInfo')

    const body = '{"name":"Ada","email":"ada@example.com","tax_id":"12345678"}'
    const postTs = String(Date.now())
    const created = await send(gw.url, '/v1/clients/', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        authorization: `Bearer ${token}`,
        'x-api-key': apiKey,
        'x-api-timestamp': postTs,
        'x-api-signature': sign(`${postTs}POST/v1/clients/${body}`)
      },
      body
    })
    t.equal(created.status, 201)

    const getTs = String(Date.now())
    const listed = await send(gw.url, '/v1/clients/', {
      headers: { authorization: `Bearer ${token}`, 'x-api-key': apiKey, 'x-api-timestamp': getTs, 'x-api-signature': sign(`${getTs}GET/v1/clients/`) }
    })
    t.equal(listed.status, 200)
    t.equal(listed.json<{ items: Array<{ name: string }> }>().items[0]?.name, 'Ada')

    // The classic mistake: a trailing newline (echo instead of printf) in the signing string.
    const withNewline = await send(gw.url, '/v1/clients/', {
      headers: { authorization: `Bearer ${token}`, 'x-api-key': apiKey, 'x-api-timestamp': getTs, 'x-api-signature': sign(`${getTs}GET/v1/clients/\n`) }
    })
    t.equal(withNewline.status, 401)
    t.equal(withNewline.json().code, 'INVALID_SIGNATURE')
  })
}
