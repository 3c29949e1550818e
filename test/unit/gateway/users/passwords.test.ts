import t from 'tap'
import { SCRYPT_LOG_N } from '../../../../gateway/src/config/env.js'
import { SCRYPT_P, SCRYPT_R, hashPassword, verifyPassword } from '../../../../gateway/src/users/passwords.js'

// Each scrypt call at the production cost takes a few hundred ms: this file makes three.
const PASSWORD = 'correct horse battery staple ✓'
const hash = await hashPassword(PASSWORD)

t.test('the hash is a PHC string at OWASP\'s cost', async (t) => {
  t.equal(SCRYPT_LOG_N, 17)
  t.equal(SCRYPT_R, 8)
  t.equal(SCRYPT_P, 1)
  const match = /^\$scrypt\$ln=17,r=8,p=1\$([A-Za-z0-9+/]+)\$([A-Za-z0-9+/]+)$/.exec(hash)
  t.ok(match, `PHC form: ${hash}`)
  t.equal(Buffer.from(match?.[1] ?? '', 'base64').length, 16, '16-byte salt')
  t.equal(Buffer.from(match?.[2] ?? '', 'base64').length, 32, '32-byte hash')
  t.notOk(hash.includes(PASSWORD), 'the password is not in the hash')
})

t.test('round trip: the right password verifies', async (t) => {
  t.equal(await verifyPassword(PASSWORD, hash), true)
})

t.test('a wrong password does not verify', async (t) => {
  t.equal(await verifyPassword(PASSWORD.slice(0, -1), hash), false)
})

t.test('hashing the same password twice gives different salts', async (t) => {
  // Compares the salt of a second hash; this is the third scrypt call of the file.
  const again = await hashPassword(PASSWORD)
  t.not(again.split('$')[3], hash.split('$')[3])
})

t.test('a cost of 14 to 20 (KEYGATE_PASSWORD_SCRYPT_LOG_N) is written into the hash; others are refused', async (t) => {
  const cheap = await hashPassword(PASSWORD, 14)
  t.match(cheap, /^\$scrypt\$ln=14,r=8,p=1\$/)
  t.equal(await verifyPassword(PASSWORD, cheap), true)
  t.equal(await verifyPassword('wrong password', cheap), false)
  for (const logN of [13, 21, 15.5]) await t.rejects(hashPassword(PASSWORD, logN), { name: 'RangeError', message: `scrypt cost ${logN}: use 14 to 20` })
})

t.test('malformed PHC strings verify nothing', async (t) => {
  const [, , params, salt, digest] = hash.split('$') as [string, string, string, string, string]
  const cases: Array<[string, string]> = [
    ['empty', ''],
    ['plain text', PASSWORD],
    ['another algorithm', `$argon2id$v=19$m=65536,t=3,p=4$${salt}$${digest}`],
    ['no hash field', `$scrypt$${params}$${salt}`],
    ['empty hash field', `$scrypt$${params}$${salt}$`],
    ['missing parameters', `$scrypt$$${salt}$${digest}`],
    ['parameters in another order', `$scrypt$r=8,ln=17,p=1$${salt}$${digest}`],
    ['salt not base64', `$scrypt$${params}$!!!!$${digest}`],
    ['hash with base64 padding', `$scrypt$${params}$${salt}$${digest}=`],
    ['trailing newline', `${hash}\n`],
    ['leading space', ` ${hash}`],
    ['bcrypt', '$2b$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234']
  ]
  for (const [label, phc] of cases) t.equal(await verifyPassword(PASSWORD, phc), false, label)
})

t.test('a well-shaped PHC string whose hash field decodes to no bytes verifies nothing', async (t) => {
  // "A" is one base64 character: it decodes to zero bytes. Comparing zero bytes with zero bytes
  // must not count as a match (it once did: any password verified).
  const [, , params, salt] = hash.split('$') as [string, string, string, string]
  t.equal(await verifyPassword('any password at all', `$scrypt$${params}$${salt}$A`), false)
})

t.test('a PHC string with impossible parameters never verifies', async (t) => {
  // A plain false, not a throw (which would surface as a 500 at login).
  const [, , , salt, digest] = hash.split('$') as [string, string, string, string, string]
  for (const params of ['ln=99,r=8,p=1', 'ln=0,r=8,p=1', 'ln=17,r=0,p=1', 'ln=17,r=8,p=0']) {
    t.equal(await verifyPassword(PASSWORD, `$scrypt$${params}$${salt}$${digest}`), false, params)
  }
})
