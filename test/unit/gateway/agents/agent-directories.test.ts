// What a client is told of a directory that failed (publicReason): the kind of failure in keygate's
// words, from each message remote-key-set.ts and net/guarded-fetch.ts write; never an address, a
// resolution or a socket error (the operator's log keeps those). The whole path, with each failure
// made for real, is test/system/agents-hostile.test.ts.
import t from 'tap'
import { createAgentDirectories, publicReason } from '../../../../gateway/src/agents/agent-directories.js'
import { directoryFetch } from '../../../../gateway/src/agents/directory-fetch.js'
import { signatureAgentOf, type SignatureAgent } from '../../../../gateway/src/agents/signature-agent.js'
import type { GatewayError } from '../../../../gateway/src/errors.js'
import type { Resolver } from '../../../../gateway/src/net/guarded-fetch.js'

const WHERE = 'https://a.test: the key set at https://a.test/.well-known/http-message-signatures-directory'

t.test('each kind of failure, in keygate\'s words; nothing of the network keygate sees', async (t) => {
  const cases: Array<[string, string]> = [
    [`${WHERE} is refused: it is not signed: no Signature-Input and Signature on the answer`,
      'it is not signed: no Signature-Input and Signature on the answer'],
    [`${WHERE} answered 302, a redirect to https://169.254.169.254/: redirects are not followed`, 'it answered with a redirect; keygate follows none'],
    [`${WHERE} did not answer within 3000 ms`, 'it did not answer within 3000 ms'],
    [`${WHERE} could not be fetched: https://a.test/x: answered 500`, 'it answered 500'],
    [`${WHERE} is 70000 bytes (Content-Length), over the 65536 allowed`, 'it is over the 65536 bytes allowed'],
    [`${WHERE} is over the 65536 bytes allowed`, 'it is over the 65536 bytes allowed'],
    [`${WHERE} holds 40 keys, over the 32 allowed`, 'it holds more than the 32 keys allowed'],
    [`${WHERE} is not JSON`, 'it is not a key directory keygate can use (JSON, a JWK Set with a key for Ed25519, RSA or P-256)'],
    [`${WHERE} is not a JWK Set: it has no "keys" array`, 'it is not a key directory keygate can use (JSON, a JWK Set with a key for Ed25519, RSA or P-256)'],
    [`${WHERE} could not be fetched: db.internal resolves to no address keygate may connect to: 10.0.0.5 is a private (RFC 1918) address`,
      'it could not be fetched from a public address over HTTPS'],
    [`${WHERE} could not be fetched: getaddrinfo ENOTFOUND db.internal`, 'it could not be fetched from a public address over HTTPS'],
    [`${WHERE} could not be fetched: connect ECONNREFUSED 203.0.113.9:443`, 'it could not be fetched from a public address over HTTPS']
  ]
  for (const [error, told] of cases) t.equal(publicReason(error), told, told)
})

// The budget of 60 new directories a minute (issue #40), through the real directory fetch and its
// address guard, with a resolver the test controls (no packet leaves: every name either resolves
// to a refused address, which the guard refuses before connecting, or does not resolve).
t.test('the new-directory budget: refusals that sent nothing are free; failed lookups count; configured agents never wait', async (t) => {
  const looked = new Map<string, number>()
  const resolver: Resolver = async (hostname) => {
    looked.set(hostname, (looked.get(hostname) ?? 0) + 1)
    if (hostname.startsWith('private-')) return [{ address: '10.0.0.7', family: 4 }]
    throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' })
  }
  const directories = createAgentDirectories({
    fetch: directoryFetch({ resolver }),
    checkDirectory: () => undefined,
    named: (origin) => origin === 'https://private-listed.test'
  })
  t.teardown(() => { directories.close() })
  const agent = (host: string): SignatureAgent => signatureAgentOf(`"https://${host}"`, 'sig1')
  const refusal = async (host: string, routeNamesAgent = false): Promise<string> =>
    await Promise.resolve().then(() => directories.keyFor(agent(host), 'some-keyid', routeNamesAgent))
      .then(() => 'let in', (err: GatewayError) => `${err.code}: ${err.message}`)
  const BUDGET = /at most 60 directories it does not hold a minute/

  // in batches of 50: a first fetch holds its place in the budget while its name is resolved
  const refusedByAddress: string[] = []
  for (let i = 0; i < 200; i += 50) {
    refusedByAddress.push(...await Promise.all(Array.from({ length: 50 }, async (_, j) => await refusal(`private-${i + j}.test`))))
  }
  t.equal(refusedByAddress.filter((why) => /AGENT_DIRECTORY_UNAVAILABLE: .*it could not be fetched from a public address over HTTPS$/.test(why)).length, 200,
    '200 made-up directories on a private address: each refused for its address, none for the budget')
  t.equal(directories.stats().failed, 200, 'each failure remembered')
  t.match(await refusal('private-7.test'), /could not be fetched from a public address/, 'named again: refused')
  t.equal(looked.get('private-7.test'), 1, 'at once, from what is remembered (not looked up again)')

  const unresolved = await Promise.all(Array.from({ length: 100 }, async (_, i) => await refusal(`nowhere-${i}.test`)))
  t.equal(unresolved.filter((why) => BUDGET.test(why)).length, 40, 'names that do not resolve: 60 looked up, the 40 others refused for the budget')
  t.equal([...looked.keys()].filter((name) => name.startsWith('nowhere-')).length, 60)
  t.match(await refusal('another.test'), BUDGET, 'an unknown agent now waits for the next minute')
  t.notMatch(await refusal('private-listed.test'), BUDGET, 'an origin the agents file names does not')
  t.notMatch(await refusal('listed-by-route.test', true), BUDGET, 'nor one the route\'s agents list names')
  t.equal(looked.get('private-listed.test'), 1, 'the first fetched')
  t.equal(looked.get('listed-by-route.test'), 1, 'the second too')
})
