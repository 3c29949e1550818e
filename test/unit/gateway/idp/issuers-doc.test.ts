// docs/identity-providers.md's configurations, read from the page and checked as keygate checks
// them at start: the four variables of "One issuer: four variables", the file of "The issuers
// file", and each entry of "Configurations for common IdPs".
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
    keys: { maxStaleMs: 86_400_000, unknownKidIntervalMs: 30_000, minRefreshMs: 60_000, maxRefreshMs: 86_400_000 }
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
