// A test certificate authority and a server certificate it issued, for HTTPS servers a test runs
// under made-up names (agent.test): the client trusts caPem, the server presents certPem and
// keyPem. Made with openssl (EC P-256, valid for a week) in a temp dir removed at once; one per
// set of names per process.
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { isIP } from 'node:net'
import { join } from 'node:path'

export interface TestCertificates {
  /** the CA's certificate: what a client trusts */
  caPem: string
  /** the server's certificate, for `names` (DNS names, or IP addresses), issued by the CA */
  certPem: string
  keyPem: string
}

const made = new Map<string, TestCertificates>()

/** A CA and a server certificate for `names` (the first is its subject's CN); cached per process by names. */
export function testCertificates (names: readonly string[]): TestCertificates {
  if (names.length === 0) throw new Error('testCertificates: name at least one DNS name')
  const key = names.join(',')
  const cached = made.get(key)
  if (cached !== undefined) return cached
  const dir = mkdtempSync(join(tmpdir(), 'keygate-test-ca-'))
  try {
    const openssl = (args: string[]): void => {
      execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] })
    }
    const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes']
    openssl(['req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '7', '-subj', '/CN=keygate test CA',
      '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign'])
    openssl(['req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', `/CN=${names[0]}`])
    const altNames = names.map((name) => isIP(name) === 0 ? `DNS:${name}` : `IP:${name}`).join(',')
    writeFileSync(join(dir, 'server.ext'),
      `subjectAltName=${altNames}\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n`)
    openssl(['x509', '-req', '-in', 'server.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial',
      '-out', 'server.pem', '-days', '7', '-extfile', 'server.ext'])
    const certificates = {
      caPem: readFileSync(join(dir, 'ca.pem'), 'utf8'),
      certPem: readFileSync(join(dir, 'server.pem'), 'utf8'),
      keyPem: readFileSync(join(dir, 'server.key'), 'utf8')
    }
    made.set(key, certificates)
    return certificates
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}
