// Protected resources, each piece alone: which identifiers a resource may have and where its
// metadata is; the metadata document from configuration, scopes in each issuer's terms; the
// challenge each refusal gets (quoted, escaped); the per-route audience check of an IdP token;
// the issuers the route file names, checked against the issuers file.
import t from 'tap'
import { GatewayError } from '../../../../gateway/src/errors.js'
import { createIdpVerifier, type IdpToken } from '../../../../gateway/src/idp/idp-tokens.js'
import { issuersFromDocument, type IssuerConfig } from '../../../../gateway/src/idp/issuers.js'
import { checkAudience } from '../../../../gateway/src/resources/audience.js'
import { compilePolicy } from '../../../../gateway/src/mcp-calls/policy.js'
import { quoted, resourceChallenge, tokenChallenges } from '../../../../gateway/src/resources/challenge.js'
import { issuerScopes, resourceMetadata } from '../../../../gateway/src/resources/metadata.js'
import {
  protectedResource, resourceAudiences, resourceIdProblem, resourceIssuerProblems, resourcesOf
} from '../../../../gateway/src/resources/resource.js'
import { generateKeyPairSync } from 'node:crypto'
import { SignJWT } from 'jose'

const [corp, plain] = issuersFromDocument({
  issuers: [
    { name: 'corp', issuer: 'https://login.example.com', audiences: ['keygate'], scopes: { map: { 'api.read': 'reports:read', 'api.write': ['reports:read', 'reports:write'] } } },
    { name: 'plain', issuer: 'https://plain.example.com', audiences: ['keygate'] }
  ]
}, 'issuers.yaml') as [IssuerConfig, IssuerConfig]

const mcp = protectedResource({ id: 'https://api.example.com/mcp', name: 'MCP', issuers: ['corp', 'plain'], audiences: ['api://mcp'] })
const root = protectedResource({ id: 'https://api.example.com', name: 'Root', documentation: 'https://docs.example.com', issuers: ['corp'] })

t.test('a resource identifier: an absolute https URL (http on loopback), no query, fragment or user', async (t) => {
  const cases: Array<[string, RegExp | undefined]> = [
    ['https://api.example.com/mcp', undefined],
    ['https://api.example.com', undefined],
    ['http://127.0.0.1:8080/mcp', undefined],
    ['http://localhost/mcp', undefined],
    ['http://[::1]:3000/mcp', undefined],
    ['http://127.0.0.2/mcp', undefined],
    ['http://127.0.0.1.example.com/mcp', /must be an https URL/],
    ['http://api.example.com/mcp', /must be an https URL/],
    ['/mcp', /not an absolute URL/],
    ['https://api.example.com/mcp?x=1', /no query and no fragment/],
    ['https://api.example.com/mcp#top', /no query and no fragment/],
    ['https://user:pw@api.example.com/mcp', /no user or password/],
    ['ftp://api.example.com/mcp', /must be an https URL/]
  ]
  for (const [id, problem] of cases) t.match(resourceIdProblem(id), problem ?? undefined, id)
})

t.test('the metadata URL: the well-known path between the id\'s origin and its path (RFC 9728 §3.1)', async (t) => {
  t.equal(mcp.metadataPath, '/.well-known/oauth-protected-resource/mcp')
  t.equal(mcp.metadataUrl, 'https://api.example.com/.well-known/oauth-protected-resource/mcp')
  t.equal(root.metadataPath, '/.well-known/oauth-protected-resource', 'no path: the well-known URI itself')
  t.equal(protectedResource({ id: 'https://api.example.com/', name: 'x', issuers: ['corp'] }).metadataPath, '/.well-known/oauth-protected-resource')
  t.equal(protectedResource({ id: 'https://api.example.com:8443/a/b/', name: 'x', issuers: ['corp'] }).metadataUrl,
    'https://api.example.com:8443/.well-known/oauth-protected-resource/a/b/', 'port and trailing slash kept')
  t.same([...mcp.accepted], ['https://api.example.com/mcp', 'api://mcp'])
})

t.test('the metadata: everything from configuration, scopes in each issuer\'s terms', async (t) => {
  const routes = [
    { resource: mcp, scopes: ['reports:read'] },
    { resource: mcp, scopes: ['reports:write', 'reports:read'] },
    { resource: root, scopes: ['admin'] },
    { scopes: ['other'] }
  ]
  t.same(resourceMetadata(mcp, routes, [corp, plain]), {
    resource: 'https://api.example.com/mcp',
    authorization_servers: ['https://login.example.com', 'https://plain.example.com'],
    scopes_supported: ['api.read', 'api.write', 'reports:read', 'reports:write'],
    bearer_methods_supported: ['header'],
    resource_name: 'MCP'
  }, 'corp\'s names that map to them, plain\'s as they are; no resource_documentation when none is configured')
  t.same(resourceMetadata(root, routes, [corp, plain]), {
    resource: 'https://api.example.com',
    authorization_servers: ['https://login.example.com'],
    scopes_supported: ['admin'],
    bearer_methods_supported: ['header'],
    resource_name: 'Root',
    resource_documentation: 'https://docs.example.com'
  }, 'a scope no IdP scope maps to: keygate\'s name')
  t.same(resourceMetadata(mcp, routes, [plain]).authorization_servers, ['https://plain.example.com'], 'an issuer not in force is left out')
  t.same(issuerScopes(corp, ['reports:write']), ['api.write'])
  t.same(issuerScopes(undefined, ['reports:write']), ['reports:write'], 'keygate\'s own token: keygate\'s names')
  const ownMap = protectedResource({ id: 'https://api.example.com/own', name: 'Own', issuers: ['corp'], scopes: { map: { 'own.write': 'reports:write' } } })
  t.same(issuerScopes(corp, ['reports:write'], ownMap), ['own.write'], 'a resource\'s own map, in place of the issuer\'s')
  t.same(issuerScopes(undefined, ['reports:write'], ownMap), ['reports:write'], 'keygate\'s own token: keygate\'s names, whatever the map')
  t.same(JSON.parse(JSON.stringify(ownMap)).scopeMap, undefined, 'the map made of it is not shown as JSON')
  t.same(resourcesOf(routes), [mcp, root], 'each resource once, in route order')
  const policy = compilePolicy({
    tools: { 'write-*': ['reports:write'], drop: 'deny' }, prompts: { p: ['prompts:use'] }, methods: { 'logging/*': ['ops'] }, default: ['reports:list']
  })
  t.same(resourceMetadata(root, [{ resource: root, scopes: ['admin'], mcp: policy }], [plain]).scopes_supported,
    ['admin', 'ops', 'prompts:use', 'reports:list', 'reports:write'], 'an MCP route: its scopes and every scope its policy may ask for (never deny)')
})

t.test('challenges: quoted and escaped; 401 with the metadata URL, invalid_token when a token was refused; 403 with the scope', async (t) => {
  t.equal(quoted('a"b\\c\u00e9'), '"a\\"b\\\\c?"')
  const missing = new GatewayError('MISSING_TOKEN', 'Send a token')
  t.equal(resourceChallenge(missing, mcp, undefined),
    'Bearer realm="keygate", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp"')
  const invalid = new GatewayError('INVALID_TOKEN', 'This token is for "x\\y", not \u00fcs')
  t.equal(resourceChallenge(invalid, mcp, corp),
    'Bearer realm="keygate", resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp", ' +
    'error="invalid_token", error_description="This token is for \'x/y\', not ?s"', 'error_description without " or \\ (RFC 6750 §3)')
  t.match(resourceChallenge(new GatewayError('UNKNOWN_SIGNING_KEY', 'no such kid'), mcp, corp), /error="invalid_token"/)
  t.notMatch(resourceChallenge(new GatewayError('MISSING_SIGNATURE_HEADERS', 'sign it'), mcp, corp), /error=/, 'a 401 that is not the token\'s: no error')
  const scope = new GatewayError('INSUFFICIENT_SCOPE', 'more', {
    extra: { requiredScopes: ['reports:read', 'reports:write'], missingScopes: ['reports:write'] }
  })
  t.equal(resourceChallenge(scope, mcp, corp),
    'Bearer realm="keygate", error="insufficient_scope", scope="api.read api.write", ' +
    'resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp"', 'the IdP\'s names for every scope the route needs')
  t.match(resourceChallenge(scope, mcp, undefined), /scope="reports:read reports:write"/, 'keygate\'s token: keygate\'s names')
  t.equal(resourceChallenge(new GatewayError('RATE_LIMITED', 'slow'), mcp, corp), undefined, 'no challenge for other refusals')
  t.equal(resourceChallenge(new GatewayError('KEY_OWNER_MISMATCH', 'not yours'), mcp, corp), undefined)
})

t.test('the audience check: the resource\'s id or audiences on its routes, the issuer\'s audiences elsewhere', async (t) => {
  const token = (issuer: IssuerConfig, ...audiences: string[]) => ({ issuer, audiences: new Set(audiences) })
  const refusal = (fn: () => void): string => {
    try { fn() } catch (err) { return `${(err as GatewayError).code}: ${(err as Error).message}` }
    return 'accepted'
  }
  t.equal(refusal(() => { checkAudience(token(corp, 'https://api.example.com/mcp'), mcp) }), 'accepted', 'the id')
  t.equal(refusal(() => { checkAudience(token(corp, 'other', 'api://mcp'), mcp) }), 'accepted', 'one of its audiences, in a list')
  t.equal(refusal(() => { checkAudience(token(corp, 'https://api.example.com'), mcp) }),
    'INVALID_TOKEN: This token is for https://api.example.com, not for https://api.example.com/mcp: ask corp for a token with resource=https://api.example.com/mcp',
    'a token for another resource')
  t.match(refusal(() => { checkAudience(token(corp), mcp) }), /This token is for no audience/)
  t.match(refusal(() => { checkAudience(token(corp, 'keygate'), mcp) }), /not for https:\/\/api.example.com\/mcp/, 'the issuer\'s audience is not the resource\'s')
  t.match(refusal(() => { checkAudience(token(plain, 'https://api.example.com'), root) }), /takes tokens from corp, not from plain/, 'an issuer the resource does not name')
  t.equal(refusal(() => { checkAudience(token(corp, 'keygate'), undefined) }), 'accepted', 'no resource: the issuer\'s audiences')
  t.match(refusal(() => { checkAudience(token(corp, 'https://api.example.com/mcp'), undefined) }), /this route takes tokens of corp for keygate/,
    'a token for a resource opens no route outside it')
})

t.test('the issuer check, wherever the route file and the issuers file are both known', async (t) => {
  const routes = [{ resource: mcp }, { resource: root }, {}]
  t.same(resourceIssuerProblems(routes, [corp, plain]), [])
  t.same(resourceIssuerProblems(routes, [corp]), [
    'resources: "https://api.example.com/mcp" names the issuer "plain", which is not a trusted issuer (known: corp)'
  ])
  t.same(resourceIssuerProblems([{ resource: root }], []), [
    'resources: "https://api.example.com" names the issuer "corp", which is not a trusted issuer (none is configured: KEYGATE_ISSUERS or KEYGATE_OIDC_ISSUER)'
  ])
  t.same(resourceAudiences(routes, 'corp'), ['https://api.example.com/mcp', 'api://mcp', 'https://api.example.com'])
  t.same(resourceAudiences(routes, 'plain'), ['https://api.example.com/mcp', 'api://mcp'])
})

t.test('an IdP token\'s aud, verified once: a resource\'s id passes the issuer\'s check, and aud is kept as a set', async (t) => {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' })
  const verifier = createIdpVerifier([plain], () => ({ keyFor: async () => publicKey }), Date.now, () => ['https://api.example.com/mcp'])
  const sign = async (aud?: string | string[]): Promise<string> => await new SignJWT({ ...(aud !== undefined && { aud }) })
    .setProtectedHeader({ alg: 'ES256' }).setIssuer(plain.issuer).setSubject('robot').setIssuedAt().setExpirationTime('5m').sign(privateKey)
  const verified = await verifier.verify(await sign(['https://api.example.com/mcp', 'x']), plain) as IdpToken
  t.same([...verified.audiences], ['https://api.example.com/mcp', 'x'])
  t.same([...(await verifier.verify(await sign('keygate'), plain) as IdpToken).audiences], ['keygate'], 'a string aud')
  await t.rejects(async () => await verifier.verify(await sign('elsewhere'), plain), { code: 'INVALID_TOKEN', message: /its audience \(aud\) is none/ })
  await t.rejects(async () => await verifier.verify(await sign(), plain), { code: 'INVALID_TOKEN', message: /names no audience/ })
})

t.test('DPoP beside Bearer (RFC 9449 §7.1): both challenges where both are taken, DPoP\'s alone where it is required', async (t) => {
  const resource = protectedResource({ id: 'https://api.example.com/mcp', name: 'MCP', issuers: ['corp'] })
  const metadata = 'resource_metadata="https://api.example.com/.well-known/oauth-protected-resource/mcp"'
  const offer = { algs: 'ES256 EdDSA', required: false, scheme: undefined }
  const missing = new GatewayError('MISSING_TOKEN', 'Send a token')
  t.same(tokenChallenges(missing, 'Bearer realm="keygate"', offer, undefined), ['Bearer realm="keygate"', 'DPoP algs="ES256 EdDSA"'],
    'no token: both, no error')
  t.same(tokenChallenges(missing, undefined, { ...offer, required: true }, resource), [`DPoP algs="ES256 EdDSA", ${metadata}`], 'required: DPoP\'s alone')
  const proof = new GatewayError('INVALID_DPOP_PROOF', 'The DPoP proof\'s htm is "GET"')
  t.same(tokenChallenges(proof, undefined, { ...offer, scheme: 'dpop' }, resource)?.[1],
    `DPoP algs="ES256 EdDSA", ${metadata}, error="invalid_dpop_proof", error_description="The DPoP proof's htm is 'GET'"`, 'the proof\'s error on DPoP\'s')
  t.match(tokenChallenges(new GatewayError('USE_DPOP_NONCE', 'nonce'), undefined, offer, undefined)?.[1], /error="use_dpop_nonce"/)
  t.match(tokenChallenges(new GatewayError('DPOP_REQUIRED', 'bound'), undefined, offer, undefined)?.[1], /error="invalid_token"/)
  t.match(tokenChallenges(new GatewayError('INVALID_TOKEN', 'expired'), undefined, { ...offer, scheme: 'dpop' }, undefined)?.[1], /error="invalid_token"/,
    'a token sent as DPoP and refused: invalid_token on DPoP\'s')
  t.equal(tokenChallenges(new GatewayError('INVALID_TOKEN', 'expired'), undefined, { ...offer, scheme: 'bearer' }, undefined)?.[1], 'DPoP algs="ES256 EdDSA"',
    'one sent as Bearer: DPoP\'s without an error')
  t.equal(tokenChallenges(new GatewayError('INSUFFICIENT_SCOPE', 'scope'), undefined, offer, resource), undefined, 'not a token\'s refusal: none')
  t.equal(tokenChallenges(new GatewayError('INVALID_SIGNATURE', 'sig'), undefined, offer, resource), undefined)

  const required = protectedResource({ id: 'https://api.example.com/strict', name: 'Strict', issuers: ['corp'], dpop: 'required' })
  const routes = [{ resource, scopes: [], dpop: 'allowed' }, { resource: required, scopes: [], dpop: 'required' }]
  t.same(resourceMetadata(resource, routes, [], ['ES256']).dpop_signing_alg_values_supported, ['ES256'])
  t.equal(resourceMetadata(resource, routes, [], ['ES256']).dpop_bound_access_tokens_required, false)
  t.equal(resourceMetadata(required, routes, [], ['ES256']).dpop_bound_access_tokens_required, true)
  t.equal(resourceMetadata(resource, [{ resource, scopes: [], dpop: 'required' }], [], ['ES256']).dpop_bound_access_tokens_required, true,
    'every route of it requires DPoP: so does it')
})
