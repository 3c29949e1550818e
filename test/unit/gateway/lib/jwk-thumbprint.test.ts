// RFC 7638 thumbprints (lib/jwk-thumbprint.ts), the one rule for registered keys, published key sets
// and DPoP proof keys: the RFC's own example, jose's calculateJwkThumbprint for each key type, and
// no thumbprint where the rule has none.
import { generateKeyPairSync } from 'node:crypto'
import t from 'tap'
import { calculateJwkThumbprint, type JWK } from 'jose'
import { jwkThumbprint } from '../../../../gateway/src/lib/jwk-thumbprint.js'

t.test('the RFC\'s example, and jose\'s value for each key type, whatever other members the JWK has', async (t) => {
  // RFC 7638 §3.1
  const example = {
    kty: 'RSA',
    n: '0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjB' +
      'ZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8' +
      'KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_' +
      'xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw',
    e: 'AQAB',
    alg: 'RS256',
    kid: '2011-04-29'
  }
  t.equal(jwkThumbprint(example), 'NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs')
  const pairs = {
    rsa: generateKeyPairSync('rsa', { modulusLength: 2048 }),
    ec: generateKeyPairSync('ec', { namedCurve: 'P-256' }),
    ed25519: generateKeyPairSync('ed25519')
  }
  for (const [type, pair] of Object.entries(pairs)) {
    const jwk = pair.publicKey.export({ format: 'jwk' }) as Record<string, unknown>
    t.equal(jwkThumbprint({ ...jwk, use: 'sig', kid: 'x' }), await calculateJwkThumbprint(jwk as JWK), `${type}: jose's thumbprint`)
  }
})

t.test('no thumbprint for a type without one, or a required member that is not a string', async (t) => {
  t.equal(jwkThumbprint({ kty: 'oct', k: 'c2VjcmV0' }), undefined, 'a symmetric key')
  t.equal(jwkThumbprint({ kty: 'EC', crv: 'P-256', x: 'AA' }), undefined, 'an EC key without y')
  t.equal(jwkThumbprint({ kty: 'RSA', n: 'AQAB', e: 65537 }), undefined, 'a number where a string goes')
  t.equal(jwkThumbprint({ kty: 'constructor' }), undefined, 'a prototype name as kty')
})
