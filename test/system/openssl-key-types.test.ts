// Ed25519 and EC P-256 keys end to end, made and used with the openssl command line only (keys in a
// temp dir, never committed): registration with openssl's proof, business requests in the seed
// scheme signed by openssl going through to the upstream, and what is refused never reaching it:
// a wrong signature (with advice for the key type), a replay, and for P-256 a replay under the
// malleated signature (r, n - s), which verifies too.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { inProcess } from '../helpers/cli.js'
import { send } from '../helpers/http.js'
import { startRecorder } from '../helpers/recorder.js'
import { STORE_KINDS, addUser, login, startTestGateway } from '../helpers/stack.js'

function openssl (args: string[], input?: string | Buffer): Buffer {
  return execFileSync('openssl', args, { input, stdio: ['pipe', 'pipe', 'pipe'] })
}

const P256_N = 0xffffffff00000000ffffffffffffffffbce6faada7179e84f3b9cac2fc632551n

/** The DER signature (r, n - s) of a DER signature (r, s): the other signature ECDSA gives the same message. */
function malleate (der: Buffer): Buffer {
  const rLength = der[3] ?? 0
  const r = der.subarray(4, 4 + rLength)
  const s = BigInt('0x' + der.subarray(6 + rLength).toString('hex'))
  let hex = (P256_N - s).toString(16)
  if (hex.length % 2 === 1) hex = '0' + hex
  let sBytes = Buffer.from(hex, 'hex')
  if (((sBytes[0] ?? 0) & 0x80) !== 0) sBytes = Buffer.concat([Buffer.alloc(1), sBytes])
  const content = Buffer.concat([Buffer.from([0x02, r.length]), r, Buffer.from([0x02, sBytes.length]), sBytes])
  return Buffer.concat([Buffer.from([0x30, content.length]), content])
}

interface KeyKind {
  type: 'ed25519' | 'p256'
  genpkey: string[]
  /** signs the bytes with the private key in `pem`, as docs/signing.md#keys says */
  sign: (dir: string, pem: string, data: string) => Buffer
}

const KINDS: KeyKind[] = [
  {
    type: 'ed25519',
    genpkey: ['-algorithm', 'ed25519'],
    sign: (dir, pem, data) => {
      const file = join(dir, 'data.bin')
      writeFileSync(file, data)
      return openssl(['pkeyutl', '-sign', '-rawin', '-inkey', pem, '-in', file])
    }
  },
  {
    type: 'p256',
    genpkey: ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'],
    sign: (_dir, pem, data) => openssl(['dgst', '-sha256', '-sign', pem], data)
  }
]

for (const storeKind of STORE_KINDS) {
  t.test(`openssl-made Ed25519 and P-256 keys in the seed scheme, ${storeKind} store`, async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'keygate-openssl-types-'))
    t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
    const upstream = await startRecorder(t)
    const gw = await startTestGateway(t, { store: storeKind, upstreamUrl: upstream.url })
    await addUser(gw, 'alice')
    const token = await login(gw.url, 'alice')

    for (const kind of KINDS) {
      t.test(kind.type, async (t) => {
        const privatePem = join(dir, `${kind.type}.pem`)
        openssl(['genpkey', ...kind.genpkey, '-out', privatePem])
        const publicPem = openssl(['pkey', '-in', privatePem, '-pubout']).toString()
        const sign = (data: string): string => kind.sign(dir, privatePem, data).toString('base64')
        const expectedApiKey = openssl(['dgst', '-sha256', '-r'], openssl(['pkey', '-pubin', '-outform', 'DER'], publicPem)).toString().split(' ')[0]

        const registered = await send(gw.url, '/v1/api-keys', {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ name: `${kind.type} key`, publicKey: publicPem, signature: sign(`${kind.type} key`) })
        })
        t.equal(registered.status, 201, registered.text)
        const apiKey = registered.json<{ apiKey: string }>().apiKey
        t.equal(apiKey, expectedApiKey, 'apiKey is the SHA-256 of the DER SubjectPublicKeyInfo')

        const listed = await send(gw.url, '/v1/api-keys', { headers: { authorization: `Bearer ${token}` } })
        t.equal(listed.json<{ items: Array<{ apiKey: string; keyType: string }> }>().items.find((k) => k.apiKey === apiKey)?.keyType, kind.type,
          'the listing shows the key type')
        if (gw.config.redisUrl !== undefined) {
          const shown = await inProcess(['keys', 'show', apiKey], { REDIS_URL: gw.config.redisUrl, KEYGATE_REDIS_PREFIX: gw.config.redisPrefix })
          t.match(shown.stdout, new RegExp(`\nstatus: +active\nkeyType: +${kind.type}\n`), 'and so does keygate keys show')
        }

        const signedPost = (timestamp: string, body: string, signature: string): Promise<Awaited<ReturnType<typeof send>>> =>
          send(gw.url, '/v1/clients/', {
            method: 'POST',
            headers: {
              'content-type': 'application/json',
              authorization: `Bearer ${token}`,
              'x-api-key': apiKey,
              'x-api-timestamp': timestamp,
              'x-api-signature': signature
            },
            body
          })

        const body = `{"name":"Ada","email":"ada@example.com","tax_id":"${kind.type}"}`
        const ts = String(Date.now())
        const signature = sign(`${ts}POST/v1/clients/${body}`)
        const seen = upstream.requests.length
        const created = await signedPost(ts, body, signature)
        t.equal(created.status, 200, created.text)
        t.equal(upstream.requests.length, seen + 1, 'the upstream received it')
        t.equal(upstream.requests.at(-1)?.body.toString(), body, 'the signed body, as signed')
        t.equal(upstream.requests.at(-1)?.headers['x-gateway-key'], apiKey)

        const getTs = String(Date.now())
        const got = await send(gw.url, '/v1/clients/?limit=1', {
          headers: {
            authorization: `Bearer ${token}`, 'x-api-key': apiKey, 'x-api-timestamp': getTs, 'x-api-signature': sign(`${getTs}GET/v1/clients/?limit=1`)
          }
        })
        t.equal(got.status, 200, got.text)
        t.equal(upstream.requests.at(-1)?.url, '/v1/clients/?limit=1')

        const replayed = await signedPost(ts, body, signature)
        t.equal(replayed.status, 401)
        t.equal(replayed.json().code, 'REPLAYED_REQUEST')
        t.equal(upstream.requests.length, seen + 2, 'the replay never reached the upstream')

        if (kind.type === 'p256') {
          const malleated = malleate(Buffer.from(signature, 'base64')).toString('base64')
          t.not(malleated, signature)
          const again = await signedPost(ts, body, malleated)
          t.equal(again.status, 401, 'a replay under the malleated signature (r, n - s)')
          t.equal(again.json().code, 'REPLAYED_REQUEST')
          t.equal(upstream.requests.length, seen + 2, 'it never reached the upstream')

          // and the malleated signature of a fresh request is accepted once: it does verify
          const freshTs = String(Date.now() + 1)
          const freshBody = body.replace('Ada', 'Bea')
          const fresh = malleate(Buffer.from(sign(`${freshTs}POST/v1/clients/${freshBody}`), 'base64')).toString('base64')
          t.equal((await signedPost(freshTs, freshBody, fresh)).status, 200, 'a malleated signature verifies')
          t.equal(upstream.requests.length, seen + 3)
        }

        const wrongTs = String(Date.now())
        const before = upstream.requests.length
        const wrong = await signedPost(wrongTs, body, sign(`${wrongTs}POST/v1/clients/${body}\n`))
        t.equal(wrong.status, 401)
        t.equal(wrong.json().code, 'INVALID_SIGNATURE')
        t.match(wrong.json<{ detail: string }>().detail, /does not verify with the key of X-API-Key/)

        const tooShort = await signedPost(wrongTs, body, Buffer.alloc(32, 7).toString('base64'))
        t.equal(tooShort.json().code, 'INVALID_SIGNATURE')
        t.match(tooShort.json<{ detail: string }>().detail, kind.type === 'ed25519' ? /\(Ed25519\) holds 64/ : /\(EC P-256\) is DER/)
        t.notMatch(tooShort.json<{ detail: string }>().detail, /RSA/, 'no RSA in the advice')
        t.equal(upstream.requests.length, before, 'refused requests never reached the upstream')
      })
    }

    t.test('registration refuses other curves and a proof by another key', async (t) => {
      const p384 = join(dir, 'p384.pem')
      openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-384', '-out', p384])
      const p384Public = openssl(['pkey', '-in', p384, '-pubout']).toString()
      const refused = await send(gw.url, '/v1/api-keys', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ name: 'p384', publicKey: p384Public, signature: openssl(['dgst', '-sha256', '-sign', p384], 'p384').toString('base64') })
      })
      t.equal(refused.status, 400)
      t.equal(refused.json().code, 'INVALID_PUBLIC_KEY')
      t.match(refused.json<{ detail: string }>().detail, /ec_paramgen_curve:P-256/)

      const one = join(dir, 'one.pem')
      const two = join(dir, 'two.pem')
      openssl(['genpkey', '-algorithm', 'ed25519', '-out', one])
      openssl(['genpkey', '-algorithm', 'ed25519', '-out', two])
      const wrongProof = await send(gw.url, '/v1/api-keys', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({
          name: 'mixed',
          publicKey: openssl(['pkey', '-in', one, '-pubout']).toString(),
          signature: (KINDS[0] as KeyKind).sign(dir, two, 'mixed').toString('base64')
        })
      })
      t.equal(wrongProof.status, 400)
      t.equal(wrongProof.json().code, 'INVALID_SIGNATURE')
      t.match(wrongProof.json<{ detail: string }>().detail, /Ed25519 signature/)
    })
  })
}
