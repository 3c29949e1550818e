// docs/identity-providers.md's configurations for Keycloak, Auth0, Okta, Entra ID and Google,
// each against its IdP's discovery document as the IdP publishes it (test/fixtures/idp-discovery:
// Google's and Entra ID's documents and key sets as published, Keycloak's, Auth0's and Okta's
// documents in the shape each serves), with the capitals of the page's entries filled in. What
// keygate does at start runs on them through an injected fetch that answers only the URLs a
// document names: discovery at `<issuer>/.well-known/openid-configuration` (one URL, also for
// Auth0's issuer that ends with /), the issuer named exactly, the jwks_uri taken, the key set
// fetched and each of its published keys usable for the algorithms the entry accepts. Then a
// token shaped as that IdP's access tokens (or Google's ID tokens) are, signed by a key the test
// adds to the set, is verified end to end and names the user and scopes the page says it does.
import { generateKeyPairSync, randomUUID } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { exportJWK, SignJWT, type JWK, type JWTPayload } from 'jose'
import t from 'tap'
import { parse as parseYaml } from 'yaml'
import { createIdpVerifier } from '../../../../gateway/src/idp/idp-tokens.js'
import { createIssuerKeys, type IssuerKeys } from '../../../../gateway/src/idp/issuer-keys.js'
import { issuersFromDocument, type IssuerConfig } from '../../../../gateway/src/idp/issuers.js'
import { docBlocks } from '../../../helpers/docs.js'

const PAGE = 'docs/identity-providers.md'
const FIXTURES = new URL('../../../fixtures/idp-discovery/', import.meta.url)

interface Published {
  source: string
  placeholders?: Record<string, string>
  metadata: Record<string, unknown> & { issuer: string, jwks_uri: string, id_token_signing_alg_values_supported: string[] }
  jwks: { keys: JWK[] } | null
}

const TENANT_ID = '3f1c2b4a-5d6e-4f70-8a9b-0c1d2e3f4a5b'
const API_CLIENT_ID = '6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d'
/** what replaces the capitals of the page's entries and the placeholders of the fixtures */
const FILL: Record<string, string> = {
  KEYCLOAK_HOST: 'sso.example.com', REALM: 'corp', TENANT: 'example-tenant', ORG: 'example', TENANT_ID, API_CLIENT_ID
}

function filled (text: string): string {
  return text.replace(/\b[A-Z][A-Z_]*[A-Z]\b/g, (name) => FILL[name] ?? name)
}

/** A fixture with its placeholders filled; Entra ID's common document becomes the tenant's. */
function published (idp: string): Published {
  let text = readFileSync(new URL(`${idp}.json`, FIXTURES), 'utf8')
  text = filled(text)
  if (idp === 'entra') {
    text = text.replaceAll('{tenantid}', TENANT_ID).replaceAll('login.microsoftonline.com/common/', `login.microsoftonline.com/${TENANT_ID}/`)
  }
  return JSON.parse(text) as Published
}

/** The page's entries, as an issuers file holds them, capitals filled. */
function pageIssuers (): IssuerConfig[] {
  const blocks = docBlocks(PAGE, 'Configurations for common IdPs', 'yaml')
  return blocks.flatMap((block) => issuersFromDocument(parseYaml(`issuers:\n${filled(block)}`), 'issuers.yaml'))
}

const signer = generateKeyPairSync('rsa', { modulusLength: 2048 })
const SIGNER_KID = 'keygate-test-key'
const NOW = Math.floor(Date.now() / 1000)

/** Each IdP's token, as it issues them for an API (Google: an ID token), and what keygate should make of it. */
const TOKENS: Record<string, { header?: Record<string, unknown>, claims: (issuer: IssuerConfig) => JWTPayload, username: string, scopes: string[] }> = {
  keycloak: {
    header: { typ: 'JWT' },
    claims: (issuer) => ({
      iss: issuer.issuer,
      aud: ['keygate', 'account'],
      sub: 'f2b8c1d4-7e3a-4b5c-9d6e-1a2b3c4d5e6f',
      typ: 'Bearer',
      azp: 'keygate-portal',
      realm_access: { roles: ['api-writer', 'offline_access', 'uma_authorization'] },
      scope: 'openid profile email'
    }),
    username: 'keycloak:f2b8c1d4-7e3a-4b5c-9d6e-1a2b3c4d5e6f',
    scopes: ['clients:read', 'clients:write']
  },
  auth0: {
    header: { typ: 'JWT' },
    claims: (issuer) => ({
      iss: issuer.issuer,
      sub: 'google-oauth2|104729385610293847561',
      aud: ['https://api.example.com', `${issuer.issuer}userinfo`],
      azp: 'a1B2c3D4e5F6g7H8i9J0',
      scope: 'openid profile clients:read'
    }),
    username: 'auth0:google-oauth2|104729385610293847561',
    scopes: ['clients:read', 'openid', 'profile']
  },
  okta: {
    claims: (issuer) => ({
      ver: 1,
      jti: `AT.${randomUUID()}`,
      iss: issuer.issuer,
      aud: 'api://default',
      cid: '0oa1b2c3d4e5f6g7h8i9',
      uid: '00u1b2c3d4e5f6g7h8i9',
      sub: 'alice@example.com',
      scp: ['clients:read', 'openid']
    }),
    username: 'okta:alice@example.com',
    scopes: ['clients:read', 'openid']
  },
  entra: {
    header: { typ: 'JWT' },
    claims: (issuer) => ({
      aud: API_CLIENT_ID,
      iss: issuer.issuer,
      azp: '9b8a7c6d-5e4f-4a3b-2c1d-0e9f8a7b6c5d',
      azpacr: '0',
      name: 'Alice',
      oid: '0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0',
      preferred_username: 'alice@example.com',
      scp: 'clients.read',
      sub: 'pairwise-per-application-2fXk9Q',
      tid: TENANT_ID,
      ver: '2.0'
    }),
    username: 'entra:0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0',
    scopes: ['clients.read']
  },
  google: {
    header: { typ: 'JWT' },
    claims: (issuer) => ({
      iss: issuer.issuer,
      azp: 'keygate-caller@project.iam.gserviceaccount.com',
      aud: 'keygate',
      sub: '104729385610293847561',
      email: 'keygate-caller@project.iam.gserviceaccount.com',
      email_verified: true
    }),
    username: 'google:104729385610293847561',
    scopes: []
  }
}

t.test('each configuration of the page, against its IdP\'s published discovery document and key set', async (t) => {
  const issuers = pageIssuers()
  t.same(issuers.map((i) => i.name), ['keycloak', 'auth0', 'okta', 'entra', 'google'])
  const signerJwk: JWK = { ...await exportJWK(signer.publicKey), kid: SIGNER_KID, alg: 'RS256', use: 'sig' }

  for (const issuer of issuers) {
    await t.test(issuer.name, async (t) => {
      const document = published(issuer.name)
      const jwks = { keys: [...(document.jwks?.keys ?? []), signerJwk] }
      const asked: string[] = []
      const discoveryUrl = `${issuer.issuer.replace(/\/$/, '')}/.well-known/openid-configuration`
      const fetch: typeof globalThis.fetch = async (input) => {
        const url = String(input)
        asked.push(url)
        if (url === discoveryUrl) return Response.json(document.metadata)
        if (url === document.metadata.jwks_uri) return Response.json(jwks, { headers: { 'cache-control': 'public, max-age=3600' } })
        return new Response('not published here', { status: 404 })
      }

      t.equal(document.metadata.issuer, issuer.issuer, `the page's issuer is the one the document names, exactly: ${issuer.issuer}`)
      const accepted = issuer.algorithms.filter((alg) => document.metadata.id_token_signing_alg_values_supported.includes(alg))
      t.ok(accepted.includes('RS256'), `RS256, which it signs with, is among the algorithms the entry accepts: ${issuer.algorithms.join(', ')}`)

      const keys: IssuerKeys = createIssuerKeys(issuer, { fetch })
      t.teardown(() => { keys.close() })
      await keys.start()
      t.same(asked, [discoveryUrl, document.metadata.jwks_uri], 'discovery at the issuer\'s well-known URL, then the key set it names, nothing else')
      t.match(keys.state(), { usable: true, failures: 0 })
      for (const jwk of document.jwks?.keys ?? []) {
        t.ok(keys.keyForSync?.(jwk.kid, 'RS256') !== undefined, `the published key ${jwk.kid ?? ''} verifies RS256`)
      }

      const shape = TOKENS[issuer.name]
      if (shape === undefined) throw new Error(`no token shape for ${issuer.name}`)
      const token = await new SignJWT({ ...shape.claims(issuer) })
        .setProtectedHeader({ alg: 'RS256', kid: SIGNER_KID, ...shape.header })
        .setIssuedAt(NOW - 30)
        .setExpirationTime(NOW + 300)
        .sign(signer.privateKey)
      const verifier = createIdpVerifier([issuer], () => keys)
      t.equal(verifier.issuerOf(token), issuer, 'the token names this issuer')
      const verified = await verifier.verify(token, issuer)
      t.equal(verified.username, shape.username, `the user: ${verified.username}`)
      t.same(verified.scopes, shape.scopes, `its scopes in keygate: ${verified.scopes.join(' ') || 'none'}`)
    })
  }
})

t.test('the published documents are as their sources say: issuers, key sets and algorithms', async (t) => {
  const google = published('google')
  t.equal(google.metadata.issuer, 'https://accounts.google.com')
  t.same(google.metadata.id_token_signing_alg_values_supported, ['RS256'])
  t.equal(google.jwks?.keys.length, 2)
  const entra = published('entra')
  t.equal(entra.metadata.issuer, `https://login.microsoftonline.com/${TENANT_ID}/v2.0`)
  t.equal(entra.metadata.jwks_uri, `https://login.microsoftonline.com/${TENANT_ID}/discovery/v2.0/keys`)
  t.ok(entra.jwks?.keys.every((key) => key.alg === undefined), 'Entra ID\'s keys name no alg: keygate uses them for the RSA algorithms the entry accepts')
  t.equal(published('auth0').metadata.issuer, 'https://example-tenant.auth0.com/', 'Auth0\'s issuer ends with /')
  for (const idp of ['keycloak', 'auth0', 'okta']) t.equal(published(idp).jwks, null, `${idp}: its key set is the tenant's own; the test makes one`)
})
