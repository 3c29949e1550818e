// (i): the bench's own identity provider, for a signed GET whose bearer token is an IdP's instead
// of keygate's (docs/identity-providers.md). An issuer on a free loopback port serves what keygate
// reads of a real one, its discovery document and its JWKS (one RS256 key, made for the run), and
// the bench mints its access tokens (RFC 9068 shape: typ at+jwt, iss, aud, sub, scope, iat, exp).
// keygate fetches the keys once and caches them, and caches each verified token until it
// expires, as it does its own; verificationCost measures what the first request with a token
// pays: one verification, uncached, by keygate's own verifier in this process.
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from 'jose'
import { createIdpVerifier } from '../gateway/src/idp/idp-tokens.js'
import { singleIssuer } from '../gateway/src/idp/issuers.js'

/** what the gateway (i) is told to accept: KEYGATE_OIDC_AUDIENCE */
export const BENCH_IDP_AUDIENCE = 'https://keygate-bench.test/api'
/** KEYGATE_OIDC_NAME: the IdP user is `bench-idp:<sub>` */
export const BENCH_IDP_NAME = 'bench-idp'
/** the bench's tokens live as long as keygate's own (15 minutes); the bench mints a fresh one before each measurement when older than 5 */
const TOKEN_TTL_SECONDS = 15 * 60

export interface BenchIssuer {
  /** http://127.0.0.1:PORT: the tokens' iss and KEYGATE_OIDC_ISSUER */
  url: string
  /** a fresh access token for `subject` */
  mint: (subject: string) => Promise<string>
  close: () => Promise<void>
}

export async function startBenchIssuer (): Promise<BenchIssuer> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { modulusLength: 2048 })
  const kid = randomUUID()
  const jwk: JWK = { ...await exportJWK(publicKey), kid, alg: 'RS256', use: 'sig' }
  let url = ''
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0]
    const body = path === '/.well-known/openid-configuration'
      ? { issuer: url, jwks_uri: `${url}/jwks`, id_token_signing_alg_values_supported: ['RS256'] }
      : path === '/jwks' ? { keys: [jwk] } : undefined
    if (body === undefined) { res.statusCode = 404; res.end(); return }
    res.setHeader('content-type', 'application/json')
    res.setHeader('cache-control', 'max-age=3600')
    res.end(JSON.stringify(body))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  return {
    url,
    mint: async (subject) => await mintToken(privateKey, kid, url, subject),
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => { resolve() }))
    }
  }
}

async function mintToken (privateKey: CryptoKey, kid: string, issuer: string, subject: string): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  return await new SignJWT({ scope: 'clients:read clients:write', client_id: 'keygate-bench' })
    .setProtectedHeader({ alg: 'RS256', typ: 'at+jwt', kid })
    .setIssuer(issuer)
    .setAudience(BENCH_IDP_AUDIENCE)
    .setSubject(subject)
    .setIssuedAt(now)
    .setExpirationTime(now + TOKEN_TTL_SECONDS)
    .setJti(randomUUID())
    .sign(privateKey)
}

/**
 * CPU µs (user + system, this process) of verifying one IdP token that keygate has not seen:
 * keygate's verifier (idp/idp-tokens.ts) with the key in hand, as after the JWKS is fetched; the
 * median of `rounds` rounds of `perRound` distinct tokens, after a warm-up.
 */
export async function verificationCost (rounds = 5, perRound = 200): Promise<number> {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { modulusLength: 2048 })
  const issuerUrl = 'https://idp.bench.test'
  const issuer = singleIssuer({ issuer: issuerUrl, audience: BENCH_IDP_AUDIENCE, name: BENCH_IDP_NAME, jwksUri: `${issuerUrl}/jwks` })
  const verifier = createIdpVerifier([issuer], () => ({ keyFor: async () => publicKey, keyForSync: () => publicKey }))
  const tokens = async (n: number): Promise<string[]> =>
    await Promise.all(Array.from({ length: n }, async (_, i) => await mintToken(privateKey, 'bench', issuerUrl, `user-${i}-${randomUUID()}`)))
  for (const token of await tokens(50)) await verifier.verify(token, issuer)
  const perToken: number[] = []
  for (let round = 0; round < rounds; round++) {
    const batch = await tokens(perRound)
    const before = process.cpuUsage()
    for (const token of batch) await verifier.verify(token, issuer)
    const used = process.cpuUsage(before)
    perToken.push((used.user + used.system) / perRound)
  }
  perToken.sort((x, y) => x - y)
  return Math.round((perToken[Math.floor(perToken.length / 2)] ?? 0) * 10) / 10
}
