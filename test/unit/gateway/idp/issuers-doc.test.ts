// docs/identity-providers.md's configurations, read from the page and checked as keygate checks
// them at start: the four variables of "One issuer: four variables", the file of "The issuers
// file", each entry of "Configurations for common IdPs", and the portalLogin blocks of "The
// portal's login" (the file, and each IdP's).
import t from 'tap'
import { loadConfig } from '../../../../gateway/src/config/env.js'
import { issuersFromDocument, singleIssuer } from '../../../../gateway/src/idp/issuers.js'
import { blockSettings, docBlocks, docSnippet } from '../../../helpers/docs.js'
import { parse as parseYaml } from 'yaml'

const PAGE = 'docs/identity-providers.md'

t.test(`${PAGE}, "One issuer: four variables": the settings keygate reads, one issuer`, async (t) => {
  const config = loadConfig(blockSettings(docSnippet(PAGE, 'One issuer: four variables', 'sh')))
  const oidc = config.identityProviders.oidc
  t.ok(oidc, 'one issuer')
  const issuer = singleIssuer(oidc as NonNullable<typeof oidc>)
  t.match(issuer, { name: 'corp', issuer: 'https://login.example.com/realms/corp', audiences: ['keygate'], jwksUri: undefined })
})

t.test(`${PAGE}, "The issuers file": accepted, each value as the comments say`, async (t) => {
  const [issuer] = issuersFromDocument(parseYaml(docSnippet(PAGE, 'The issuers file', 'yaml')), 'issuers.yaml')
  t.match(issuer, {
    name: 'corp',
    algorithms: ['RS256', 'ES256'],
    clockSkewSeconds: 60,
    requiredClaims: ['client_id'],
    accessTokenType: 'at+jwt',
    subjectClaim: 'sub',
    maxTokenBytes: 8192,
    scopeClaim: 'realm_access.roles',
    keys: { maxStaleMs: 86_400_000, unknownKidIntervalMs: 30_000, minRefreshMs: 60_000, maxRefreshMs: 86_400_000, timeoutMs: 5000 }
  })
  t.same([...issuer?.scopeMap?.entries() ?? []], [['api-reader', ['clients:read']], ['api-admin', ['clients:read', 'clients:write']]])
})

t.test(`${PAGE}, "Configurations for common IdPs": each entry accepted as an issuers file's`, async (t) => {
  const blocks = docBlocks(PAGE, 'Configurations for common IdPs', 'yaml')
  t.equal(blocks.length, 5, 'Keycloak, Auth0, Okta, Entra ID, Google')
  const issuers = blocks.flatMap((block) => issuersFromDocument(parseYaml(`issuers:\n${block}`), 'issuers.yaml'))
  t.same(issuers.map((i) => i.name), ['keycloak', 'auth0', 'okta', 'entra', 'google'])
  t.equal(issuers.find((i) => i.name === 'auth0')?.issuer.endsWith('/'), true, 'Auth0\'s issuer ends with /')
  t.equal(issuers.find((i) => i.name === 'entra')?.subjectClaim, 'oid', 'Entra ID: the user\'s object id, not the pairwise sub')
  t.equal(issuers.find((i) => i.name === 'keycloak')?.scopeClaim, 'realm_access.roles')
  for (const issuer of issuers) t.equal(issuer.jwksUri, undefined, `${issuer.name}: keys by discovery`)
})

t.test(`${PAGE}, "The portal's login": the file and each IdP's portalLogin accepted, secrets read from the variables they name`, async (t) => {
  const [file, ...perIdp] = docBlocks(PAGE, 'The portal\'s login', 'yaml')
  const env = (block: string): Record<string, string> =>
    Object.fromEntries([...block.matchAll(/clientSecretEnv: ([A-Z0-9_]+)/g)].map((m) => [m[1] as string, 'secret']))
  const [corp] = issuersFromDocument(parseYaml(file ?? ''), 'issuers.yaml', env(file ?? ''))
  t.match(corp?.portalLogin, {
    clientId: 'keygate-portal',
    clientSecretEnv: 'CORP_PORTAL_SECRET',
    scopes: ['clients.read'],
    authorizationParams: { resource: 'https://api.example.com' },
    label: 'Corp SSO',
    redirectUri: 'https://api.example.com/portal/oidc/callback'
  })
  t.throws(() => issuersFromDocument(parseYaml(file ?? ''), 'issuers.yaml', {}), { message: /CORP_PORTAL_SECRET is not set/ }, 'without the variable: refused')
  t.equal(perIdp.length, 4, 'Keycloak, Auth0, Okta, Entra ID (Google: not possible, said why)')
  const issuers = perIdp.flatMap((block) => issuersFromDocument(parseYaml(`issuers:\n${block}`), 'issuers.yaml', env(block)))
  t.same(issuers.map((i) => i.name), ['keycloak', 'auth0', 'okta', 'entra'])
  for (const issuer of issuers) t.ok(issuer.portalLogin?.clientSecret(), `${issuer.name}: a confidential client`)
  t.same(issuers.find((i) => i.name === 'auth0')?.portalLogin?.authorizationParams, { audience: 'https://api.example.com' }, 'Auth0: the API as audience')
  t.same(issuers.find((i) => i.name === 'entra')?.portalLogin?.scopes, ['api://API_CLIENT_ID/.default'], 'Entra ID: the API\'s scope')
  t.equal(issuers.find((i) => i.name === 'entra')?.subjectClaim, 'oid')
  const config = loadConfig({ ...blockSettings(docSnippet(PAGE, 'One issuer: four variables', 'sh')), KEYGATE_OIDC_PORTAL_CLIENT_ID: 'keygate-portal' })
  t.equal(singleIssuer(config.identityProviders.oidc as NonNullable<typeof config.identityProviders.oidc>).portalLogin?.clientId, 'keygate-portal',
    'one issuer: KEYGATE_OIDC_PORTAL_CLIENT_ID')
})
