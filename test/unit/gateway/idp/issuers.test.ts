// The issuers file (KEYGATE_ISSUERS) and the one-issuer variables: defaults filled in, and every
// mistake reported at once, each naming the field and what is allowed.
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import {
  DEFAULT_IDP_ALGORITHMS, issuersFromDocument, loadIssuers, loadIssuersFile, singleIssuer
} from '../../../../gateway/src/idp/issuers.js'
import { remoteUrlProblem } from '../../../../gateway/src/remote-keys/key-set-fetch.js'
import { isIdpUsername } from '../../../../gateway/src/users/idp-users.js'

t.test('a minimal issuer: every default filled in', async (t) => {
  const [issuer] = issuersFromDocument({ issuers: [{ name: 'corp', issuer: 'https://login.example.com/realms/corp', audiences: ['keygate'] }] }, 'issuers.yaml')
  t.match(issuer, {
    name: 'corp',
    issuer: 'https://login.example.com/realms/corp',
    jwksUri: undefined,
    audiences: ['keygate'],
    algorithms: DEFAULT_IDP_ALGORITHMS,
    clockSkewSeconds: 60,
    requiredClaims: [],
    accessTokenType: 'any',
    subjectClaim: 'sub',
    maxTokenBytes: 8192,
    scopeClaim: undefined,
    scopeMap: undefined
  })
  t.notOk((DEFAULT_IDP_ALGORITHMS as readonly string[]).some((alg) => alg.startsWith('HS') || alg === 'none'), 'asymmetric algorithms only')
})

t.test('keys.fetchTimeoutSeconds: 1 to 30, in ms for the key set; unset, the key set\'s default (5 s)', async (t) => {
  const base = { name: 'corp', issuer: 'https://login.example.com', audiences: ['keygate'] }
  for (const seconds of [1, 2, 30]) {
    const [issuer] = issuersFromDocument({ issuers: [{ ...base, keys: { fetchTimeoutSeconds: seconds } }] }, 'issuers.yaml')
    t.equal(issuer?.keys.timeoutMs, seconds * 1000, `${seconds} s`)
  }
  t.equal(issuersFromDocument({ issuers: [base] }, 'issuers.yaml')[0]?.keys.timeoutMs, undefined)
})

t.test('a scope map: one IdP scope to one or several of keygate\'s', async (t) => {
  const [issuer] = issuersFromDocument({
    issuers: [{
      name: 'kc',
      issuer: 'https://kc.example.com/realms/api',
      audiences: ['keygate', 'account'],
      scopes: { claim: 'realm_access.roles', map: { 'api-reader': 'clients:read', 'api-admin': ['clients:read', 'clients:write'] } }
    }]
  }, 'issuers.yaml')
  t.equal(issuer?.scopeClaim, 'realm_access.roles')
  t.same([...issuer?.scopeMap?.entries() ?? []], [['api-reader', ['clients:read']], ['api-admin', ['clients:read', 'clients:write']]])
})

t.test('an empty list: no issuer trusted (the last one removed by a reload)', async (t) => {
  t.same(issuersFromDocument({ issuers: [] }, 'issuers.yaml'), [])
})

t.test('refused, each problem named', async (t) => {
  const base = { name: 'corp', issuer: 'https://login.example.com', audiences: ['keygate'] }
  const cases: Array<[string, unknown, RegExp]> = [
    ['no issuers list', {}, /issuers/],
    ['HS256', { issuers: [{ ...base, algorithms: ['HS256'] }] }, /issuers\[0\]\.algorithms\[0\]/],
    ['none', { issuers: [{ ...base, algorithms: ['none'] }] }, /issuers\[0\]\.algorithms\[0\]/],
    ['no audience', { issuers: [{ ...base, audiences: [] }] }, /issuers\[0\]\.audiences/],
    ['a name with a colon', { issuers: [{ ...base, name: 'a:b' }] }, /issuers\[0\]\.name: lower-case letters/],
    ['an unknown field', { issuers: [{ ...base, jku: 'https://x' }] }, /issuers\[0\]/],
    ['an http issuer elsewhere than loopback', { issuers: [{ ...base, issuer: 'http://login.example.com' }] }, /issuers\[0\]\.issuer: must be https:\/\//],
    ['jwksUri with credentials', { issuers: [{ ...base, jwksUri: 'https://u:p@login.example.com/jwks' }] }, /jwksUri: must not carry credentials/],
    ['jwksUri and discovery', { issuers: [{ ...base, jwksUri: 'https://login.example.com/jwks', discovery: true }] }, /give one/],
    ['no jwksUri without discovery', { issuers: [{ ...base, discovery: false }] }, /jwksUri must say/],
    ['a skew over 5 minutes', { issuers: [{ ...base, clockSkewSeconds: 3600 }] }, /clockSkewSeconds/],
    ['a fetch timeout of 0', { issuers: [{ ...base, keys: { fetchTimeoutSeconds: 0 } }] }, /issuers\[0\]\.keys\.fetchTimeoutSeconds/],
    ['a fetch timeout over 30 s', { issuers: [{ ...base, keys: { fetchTimeoutSeconds: 31 } }] }, /issuers\[0\]\.keys\.fetchTimeoutSeconds/],
    ['a mapped scope that is no scope', { issuers: [{ ...base, scopes: { map: { a: 'has space' } } }] }, /scopes\.map\.a/],
    ['one issuer twice', { issuers: [base, { ...base, name: 'other' }] }, /issuers\[1\]\.issuer: .* is issuers\[0\]'s too/],
    ['one name twice', { issuers: [base, { ...base, issuer: 'https://other.example.com' }] }, /issuers\[1\]\.name: "corp" is issuers\[0\]'s too/]
  ]
  for (const [what, document, message] of cases) {
    t.throws(() => issuersFromDocument(document, 'issuers.yaml'), { name: 'IssuersFileError', message }, what)
  }
  // every problem at once
  try {
    issuersFromDocument({ issuers: [{ ...base, issuer: 'http://a.example' }, { ...base, name: 'b', issuer: 'http://b.example' }] }, 'issuers.yaml')
    t.fail('refused')
  } catch (err) {
    t.match((err as Error).message, /^issuers\.yaml: 2 problems:\n {2}- issuers\[0\]\.issuer: .*\n {2}- issuers\[1\]\.issuer: /)
  }
})

t.test('URLs: https, or http to a loopback host only', async (t) => {
  t.equal(remoteUrlProblem('https://login.example.com/realms/x'), undefined)
  for (const loopback of ['http://127.0.0.1:4000', 'http://localhost:4000/x', 'http://[::1]:4000', 'http://127.9.9.9']) t.equal(remoteUrlProblem(loopback), undefined, loopback)
  for (const refused of ['http://10.0.0.1', 'http://169.254.169.254/latest', 'ftp://x.example', 'not a url', 'http://127.0.0.1.nip.io']) {
    t.type(remoteUrlProblem(refused), 'string', refused)
  }
})

t.test('IdP usernames: an issuer\'s name, ":", a subject of printable ASCII', async (t) => {
  const good = ['corp:alice', 'auth0:google-oauth2|1234', 'entra:00000000-0000-0000-0000-000000000000', `g:${'x'.repeat(255)}`]
  for (const name of good) t.ok(isIdpUsername(name), name)
  const bad = ['alice', 'Corp:alice', 'corp:', 'corp:a b', `g:${'x'.repeat(256)}`, ':alice', `${'c'.repeat(33)}:alice`]
  for (const name of bad) t.notOk(isIdpUsername(name), name)
})

t.test('from a file, YAML or JSON; one issuer from the variables', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'keygate-issuers-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  const yaml = join(dir, 'issuers.yaml')
  await writeFile(yaml, 'issuers:\n  - name: corp\n    issuer: https://login.example.com\n    audiences: [keygate]\n')
  t.equal((await loadIssuersFile(yaml))[0]?.name, 'corp')
  const json = join(dir, 'issuers.json')
  await writeFile(json, JSON.stringify({ issuers: [{ name: 'g', issuer: 'https://accounts.google.com', audiences: ['x'] }] }))
  t.equal((await loadIssuers({ file: json, single: undefined }))[0]?.issuer, 'https://accounts.google.com')
  await writeFile(yaml, 'issuers:\n  - name: corp\n    name: again\n')
  await t.rejects(loadIssuersFile(yaml), { name: 'IssuersFileError', message: /^issuers\.yaml: cannot be parsed: / }, 'a duplicate key')
  await t.rejects(loadIssuersFile(join(dir, 'missing.yaml')), { message: /cannot be read: ENOENT/ })
  const single = singleIssuer({ issuer: 'https://login.example.com', audience: 'keygate, api' })
  t.same([single.name, single.audiences], ['idp', ['keygate', 'api']])
  t.same(await loadIssuers({ file: undefined, single: undefined }), [], 'none configured: none trusted')
  t.throws(() => singleIssuer({ issuer: 'http://login.example.com', audience: 'x' }), { message: /^KEYGATE_OIDC_\*: issuers\[0\]\.issuer: must be https/ })
})

t.test('portalLogin: keygate as the issuer\'s OpenID client for the portal; its secret read from the variable it names', async (t) => {
  const base = { name: 'corp', issuer: 'https://login.example.com', audiences: ['keygate'] }
  const [none] = issuersFromDocument({ issuers: [base] }, 'issuers.yaml')
  t.equal(none?.portalLogin, undefined, 'no block: the portal does not log in through it')
  const [minimal] = issuersFromDocument({ issuers: [{ ...base, portalLogin: { clientId: 'portal' } }] }, 'issuers.yaml', {})
  t.match(minimal?.portalLogin, { clientId: 'portal', clientSecretEnv: undefined, scopes: [], authorizationParams: {}, label: 'corp', redirectUri: undefined })
  t.equal(minimal?.portalLogin?.clientSecret(), undefined, 'no secret: a public client')
  const [full] = issuersFromDocument({
    issuers: [{
      ...base,
      portalLogin: {
        clientId: 'portal',
        clientSecretEnv: 'CORP_PORTAL_SECRET',
        scopes: ['api:read', 'offline_access'],
        authorizationParams: { audience: 'https://api.example.com', prompt: 'login' },
        label: 'Corp SSO',
        redirectUri: 'https://api.example.com/portal/oidc/callback'
      }
    }]
  }, 'issuers.yaml', { CORP_PORTAL_SECRET: 's3cret' })
  t.equal(full?.portalLogin?.clientSecret(), 's3cret', 'the secret, from its variable')
  t.notMatch(JSON.stringify(full), /s3cret/, 'and in no JSON of the configuration')
  t.match(full?.portalLogin, { label: 'Corp SSO', scopes: ['api:read', 'offline_access'], authorizationParams: { audience: 'https://api.example.com' } })

  const cases: Array<[string, unknown, RegExp]> = [
    ['no clientId', {}, /issuers\[0\]\.portalLogin\.clientId: keygate's client id/],
    ['a secret in the file', { clientId: 'p', clientSecret: 'x' }, /issuers\[0\]\.portalLogin/],
    ['a variable that is not set', { clientId: 'p', clientSecretEnv: 'UNSET_SECRET' }, /portalLogin\.clientSecretEnv: the environment variable UNSET_SECRET is not set/],
    ['a variable name that is no name', { clientId: 'p', clientSecretEnv: 'a-b' }, /portalLogin\.clientSecretEnv: the NAME of the environment variable/],
    ['a scope with a space', { clientId: 'p', scopes: ['a b'] }, /portalLogin\.scopes\[0\]: a scope/],
    ['openid listed', { clientId: 'p', scopes: ['openid'] }, /portalLogin\.scopes: openid is always asked/],
    ['a reserved parameter', { clientId: 'p', authorizationParams: { redirect_uri: 'https://evil.example' } }, /authorizationParams\.redirect_uri: keygate sets/],
    ['response_mode', { clientId: 'p', authorizationParams: { response_mode: 'form_post' } }, /authorizationParams\.response_mode: keygate sets/],
    ['a parameter name with a space', { clientId: 'p', authorizationParams: { 'a b': 'x' } }, /authorizationParams: "a b" is not a parameter name/],
    ['a label too long', { clientId: 'p', label: 'x'.repeat(65) }, /portalLogin\.label: the button's text/],
    ['a plain-http redirect URI elsewhere than loopback', { clientId: 'p', redirectUri: 'http://portal.example.com/cb' }, /portalLogin\.redirectUri: must be https/],
    ['a redirect URI with a fragment', { clientId: 'p', redirectUri: 'https://portal.example.com/cb#x' }, /portalLogin\.redirectUri: must not have a fragment/],
    ['a redirect URI with a query', { clientId: 'p', redirectUri: 'https://portal.example.com/cb?x=1' }, /portalLogin\.redirectUri: must not have a query/]
  ]
  for (const [what, portalLogin, message] of cases) {
    t.throws(() => issuersFromDocument({ issuers: [{ ...base, portalLogin }] }, 'issuers.yaml', {}), { name: 'IssuersFileError', message }, what)
  }

  const single = singleIssuer({ issuer: 'https://login.example.com', audience: 'keygate', portalClientId: 'portal', portalClientSecret: () => 'shh' })
  t.match(single.portalLogin, { clientId: 'portal', clientSecretEnv: 'KEYGATE_OIDC_PORTAL_CLIENT_SECRET', label: 'idp' })
  t.equal(single.portalLogin?.clientSecret(), 'shh', 'one issuer from the variables: KEYGATE_OIDC_PORTAL_CLIENT_SECRET')
  t.equal(singleIssuer({ issuer: 'https://login.example.com', audience: 'keygate', portalClientId: 'portal' }).portalLogin?.clientSecret(), undefined)
})
