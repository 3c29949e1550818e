// The issuers in force, swapped by a reload: nothing changes until commit; then a removed issuer's
// tokens are refused, the ones verified before included, and a verification under way when it was
// removed is refused as it ends; an unchanged issuer keeps its keys (no fetch), a removed one's
// are closed, a discarded reload's new keys too. Tokens signed by jose with keys the test makes.
import { generateKeyPairSync, type KeyObject } from 'node:crypto'
import { SignJWT } from 'jose'
import t from 'tap'
import type { IssuerKeys } from '../../../../gateway/src/idp/issuer-keys.js'
import { createIssuersInForce, issuerFingerprint } from '../../../../gateway/src/idp/issuers-in-force.js'
import { issuersFromDocument, type IssuerConfig } from '../../../../gateway/src/idp/issuers.js'

const entry = (name: string, audiences = ['keygate']): Record<string, unknown> =>
  ({ name, issuer: `https://${name}.example.com`, audiences, jwksUri: `https://${name}.example.com/jwks` })
const issuers = (...entries: Array<Record<string, unknown>>): IssuerConfig[] => issuersFromDocument({ issuers: entries }, 'issuers.yaml')

const signing = new Map<string, { privateKey: KeyObject, publicKey: KeyObject }>()
const keyPairOf = (name: string): { privateKey: KeyObject, publicKey: KeyObject } => {
  let pair = signing.get(name)
  if (pair === undefined) signing.set(name, pair = generateKeyPairSync('ed25519'))
  return pair
}
const tokenOf = async (name: string): Promise<string> => await new SignJWT({ sub: 'alice', aud: 'keygate', iss: `https://${name}.example.com` })
  .setProtectedHeader({ alg: 'EdDSA', kid: name }).setIssuedAt().setExpirationTime('5m').sign(keyPairOf(name).privateKey)

/** Fixed keys per issuer, standing for remote-keys' set; `gate`: keyFor waits for it (a fetch under way). */
function harness () {
  const made: string[] = []
  const closed: string[] = []
  let gate: Promise<void> | undefined
  const makeKeys = (issuer: IssuerConfig): IssuerKeys => {
    made.push(issuer.name)
    return {
      issuer,
      async keyFor () {
        await gate
        return keyPairOf(issuer.name).publicKey
      },
      async start () {},
      state: () => ({ usable: true, ageSeconds: 0, failures: 0, lastError: undefined }),
      close () { closed.push(issuer.name) }
    }
  }
  return { made, closed, makeKeys, hold: (until: Promise<void>) => { gate = until } }
}

t.test('a reload commits whole: the removed issuer\'s tokens refused, the verified ones too; the added one\'s accepted', async (t) => {
  const h = harness()
  const swaps: string[][] = []
  const inForce = createIssuersInForce(issuers(entry('corp'), entry('stays')), {
    makeKeys: h.makeKeys, startKeys: async () => {}, onSwap: (keys) => swaps.push(keys.map((k) => k.issuer.name))
  })
  const corpToken = await tokenOf('corp')
  const corp = inForce.verifier.issuerOf(corpToken) as IssuerConfig
  t.equal((await inForce.verifier.verify(corpToken, corp)).username, 'corp:alice')
  t.ok(inForce.verifier.cached(corpToken), 'verified, cached')
  const staysKeys = inForce.keys.find((k) => k.issuer.name === 'stays')

  const prepared = await inForce.prepare(issuers(entry('stays'), entry('partner')))
  t.same(prepared.changes, { added: ['partner'], removed: ['corp'], changed: [] })
  t.same(h.made, ['corp', 'stays', 'partner'], 'only the new issuer\'s keys made')
  t.ok(inForce.verifier.cached(corpToken), 'prepared, not committed: corp is still in force')

  prepared.commit()
  t.equal(inForce.verifier.cached(corpToken), undefined, 'corp\'s verified token no longer cached')
  t.equal(inForce.verifier.issuerOf(corpToken), undefined, 'its iss names no trusted issuer')
  t.throws(() => inForce.verifier.verify(corpToken, corp), { code: 'INVALID_TOKEN', message: /corp is no longer trusted/ })
  t.same(h.closed, ['corp'], 'corp\'s keys closed')
  t.equal(inForce.keys.find((k) => k.issuer.name === 'stays'), staysKeys, 'the unchanged issuer keeps its keys: no fetch')
  t.same(inForce.issuers.map((i) => i.name), ['stays', 'partner'])
  t.same(swaps, [['corp', 'stays'], ['stays', 'partner']], 'the metrics told of each set')
  const partnerToken = await tokenOf('partner')
  t.equal((await inForce.verifier.verify(partnerToken, inForce.verifier.issuerOf(partnerToken) as IssuerConfig)).username, 'partner:alice')
})

t.test('a verification under way when its issuer is removed is refused as it ends', async (t) => {
  const h = harness()
  const inForce = createIssuersInForce(issuers(entry('corp')), { makeKeys: h.makeKeys, startKeys: async () => {} })
  let release!: () => void
  h.hold(new Promise((resolve) => { release = resolve }))
  const token = await tokenOf('corp')
  const pending = inForce.verifier.verify(token, inForce.verifier.issuerOf(token) as IssuerConfig)
  ;(await inForce.prepare([])).commit()
  release()
  await t.rejects(Promise.resolve(pending), { code: 'INVALID_TOKEN', message: /no longer trusted/ })
})

t.test('a changed issuer is new keys; a discarded reload closes what it made and changes nothing', async (t) => {
  const h = harness()
  const inForce = createIssuersInForce(issuers(entry('corp')), { makeKeys: h.makeKeys, startKeys: async () => {} })
  const discarded = await inForce.prepare(issuers(entry('corp', ['keygate', 'other'])))
  t.same(discarded.changes, { added: [], removed: [], changed: ['corp'] })
  discarded.discard()
  discarded.commit()
  t.same(h.closed, ['corp'], 'the new keys closed')
  t.same(inForce.issuers[0]?.audiences, ['keygate'], 'nothing put in force (commit after discard does nothing)')
  t.equal(issuerFingerprint(issuers(entry('corp'))[0] as IssuerConfig), issuerFingerprint(inForce.issuers[0] as IssuerConfig),
    'the same configuration, the same fingerprint')
})
