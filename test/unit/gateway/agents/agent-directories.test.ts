// What a client is told of a directory that failed (publicReason): the kind of failure in keygate's
// words, from each message remote-key-set.ts and net/guarded-fetch.ts write; never an address, a
// resolution or a socket error (the operator's log keeps those). The whole path, with each failure
// made for real, is test/system/agents-hostile.test.ts.
import t from 'tap'
import { publicReason } from '../../../../gateway/src/agents/agent-directories.js'

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
