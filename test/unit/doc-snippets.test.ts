// Every snippet in the docs runs in a test. This file is the inventory: each code block a reader
// would run or install (shell, code, a route file, a proxy's configuration, a page) is claimed
// below by the test that runs it, named by its page, the heading of its section and its language,
// as that test reads it (test/helpers/docs.ts). A block nobody claims fails here, naming its
// page and section; so does a claim that no longer finds its block, or whose test no longer reads it.
// Blocks that show what comes back (text, json, http, and fences without a language: diagrams,
// output) are not run; the tests that compare them with what keygate answers say so themselves.
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import t from 'tap'
import { allDocBlocks, docBlocks, type DocBlock } from '../helpers/docs.js'

/** the languages of blocks a reader runs (or installs, or loads) */
const RUNNABLE = new Set(['sh', 'js', 'ts', 'python', 'go', 'java', 'nginx', 'yaml', 'html', 'caddyfile'])
/** the languages of blocks that show what comes back */
const SHOWN = new Set(['', 'text', 'json', 'http'])

interface Claim { page: string; heading: string; lang: string; by: string }

/** Which test runs the blocks of `lang` in each section (the section includes its subsections). */
const CLAIMS: Claim[] = [
  { page: 'README.md', heading: 'keygate', lang: 'sh', by: 'test/system/start.test.ts' },
  { page: 'README.md', heading: 'Try it in two minutes', lang: 'sh', by: 'test/system/readme.test.ts' },
  { page: 'README.md', heading: 'In front of your own backend', lang: 'yaml', by: 'test/system/readme.test.ts' },
  { page: 'README.md', heading: 'In front of your own backend', lang: 'sh', by: 'test/system/readme.test.ts' },
  { page: 'client/README.md', heading: 'Install', lang: 'sh', by: 'test/system/client-readme.test.ts' },
  { page: 'client/README.md', heading: 'Quick start', lang: 'js', by: 'test/system/client-readme.test.ts' },
  { page: 'client/README.md', heading: 'CommonJS', lang: 'js', by: 'test/system/client-readme.test.ts' },
  { page: 'client/README.md', heading: 'In a browser', lang: 'html', by: 'test/system/client-browser.test.ts' },
  { page: 'client/README.md', heading: 'RFC 9421 (`scheme: \'rfc9421\'`)', lang: 'js', by: 'test/system/client-readme.test.ts' },
  { page: 'client/README.md', heading: 'DPoP: tokens bound to a key', lang: 'js', by: 'test/system/client-readme.test.ts' },
  { page: 'client/README.md', heading: 'Errors', lang: 'js', by: 'test/system/client-readme.test.ts' },
  { page: 'client/README.md', heading: 'Debugging an INVALID_SIGNATURE', lang: 'js', by: 'test/system/client-readme.test.ts' },
  { page: 'docs/cli.md', heading: 'From nothing to a signed request', lang: 'sh', by: 'test/system/cli-client.test.ts' },
  { page: 'docs/debugging-signatures.md', heading: 'Debugging INVALID_SIGNATURE', lang: 'sh', by: 'test/system/debugging-signatures-doc.test.ts' },
  { page: 'docs/debugging-signatures.md', heading: 'Debugging INVALID_SIGNATURE', lang: 'ts', by: 'test/system/debugging-signatures-doc.test.ts' },
  { page: 'docs/debugging-signatures.md', heading: '1. Re-serialised JSON', lang: 'python', by: 'test/system/debugging-signatures-doc.test.ts' },
  { page: 'docs/debugging-signatures.md', heading: '2. A trailing newline', lang: 'sh', by: 'test/system/debugging-signatures-doc.test.ts' },
  { page: 'docs/debugging-signatures.md', heading: '3. Seconds instead of milliseconds', lang: 'sh', by: 'test/system/debugging-signatures-doc.test.ts' },
  { page: 'docs/debugging-signatures.md', heading: '4. The query string left out', lang: 'js', by: 'test/system/debugging-signatures-doc.test.ts' },
  { page: 'docs/debugging-signatures.md', heading: '5. The wrong key pair', lang: 'sh', by: 'test/system/debugging-signatures-doc.test.ts' },
  { page: 'docs/debugging-signatures.md', heading: '6. A signature broken over lines', lang: 'sh', by: 'test/system/debugging-signatures-doc.test.ts' },
  {
    page: 'docs/debugging-signatures.md',
    heading: '7. A body that starts like a target (not a signature mistake)',
    lang: 'sh',
    by: 'test/system/debugging-signatures-doc.test.ts'
  },
  { page: 'docs/admin.md', heading: 'Users', lang: 'sh', by: 'test/system/operator-docs.test.ts' },
  { page: 'docs/admin.md', heading: 'The admin API', lang: 'sh', by: 'test/system/operator-docs.test.ts' },
  { page: 'docs/admin.md', heading: 'Endpoints', lang: 'sh', by: 'test/system/operator-docs.test.ts' },
  { page: 'docs/bench.md', heading: 'The benchmark', lang: 'sh', by: 'test/system/bench-doc.test.ts' },
  { page: 'docs/cli.md', heading: 'Other key types, and RFC 9421', lang: 'sh', by: 'test/system/operator-docs.test.ts' },
  { page: 'docs/cli.md', heading: 'For operators: users and keys', lang: 'sh', by: 'test/system/operator-docs.test.ts' },
  { page: 'docs/cli.md', heading: 'Through the admin API', lang: 'sh', by: 'test/system/operator-docs.test.ts' },
  { page: 'docs/cli.md', heading: 'Usage over time', lang: 'sh', by: 'test/system/usage-analytics.test.ts' },
  { page: 'docs/getting-started.md', heading: 'From a checkout', lang: 'sh', by: 'test/system/checkout-docs.test.ts' },
  { page: 'docs/getting-started.md', heading: 'Docker Compose', lang: 'sh', by: 'test/system/compose.test.ts' },
  { page: 'docs/getting-started.md', heading: 'The package and the `keygate` command', lang: 'sh', by: 'test/system/keygate-package.test.ts' },
  { page: 'docs/getting-started.md', heading: 'Signals', lang: 'sh', by: 'test/system/keygate-serve.test.ts' },
  { page: 'docs/load-balancer.md', heading: 'Trusted proxies', lang: 'sh', by: 'test/system/trusted-proxies.test.ts' },
  { page: 'docs/load-balancer.md', heading: 'nginx in front of keygate', lang: 'nginx', by: 'test/system/load-balancer-doc.test.ts' },
  { page: 'docs/observability.md', heading: 'Metrics', lang: 'sh', by: 'test/system/checkout-docs.test.ts' },
  { page: 'docs/monitoring.md', heading: 'Loading the kit', lang: 'yaml', by: 'test/system/monitoring-prometheus.test.ts' },
  { page: 'docs/recipes.md', heading: 'Running them', lang: 'sh', by: 'test/system/recipes.test.ts' },
  { page: 'docs/recipes.md', heading: 'Shell: curl and openssl', lang: 'sh', by: 'test/system/recipes.test.ts' },
  { page: 'docs/recipes.md', heading: 'Python', lang: 'python', by: 'test/system/recipes.test.ts' },
  { page: 'docs/recipes.md', heading: 'Go', lang: 'go', by: 'test/system/recipes.test.ts' },
  { page: 'docs/recipes.md', heading: 'Java', lang: 'java', by: 'test/system/recipes.test.ts' },
  { page: 'docs/routes.md', heading: 'A route file', lang: 'yaml', by: 'test/unit/doc-pages.test.ts' },
  { page: 'docs/routes.md', heading: 'A complete example', lang: 'yaml', by: 'test/unit/doc-pages.test.ts' },
  { page: 'docs/routes.md', heading: 'Rate limits and quotas', lang: 'yaml', by: 'test/unit/doc-pages.test.ts' },
  { page: 'docs/signing.md', heading: 'RFC 9421: HTTP Message Signatures', lang: 'ts', by: 'test/system/client-readme.test.ts' },
  { page: 'docs/signing.md', heading: 'RFC 9421: HTTP Message Signatures', lang: 'sh', by: 'test/system/client-readme.test.ts' },
  { page: 'docs/scaling.md', heading: 'Redis Sentinel and Redis Cluster', lang: 'sh', by: 'test/system/redis-sentinel.test.ts' },
  { page: 'docs/signing-examples.md', heading: 'The signatures with openssl', lang: 'sh', by: 'test/system/signing-examples.test.ts' },
  { page: 'docs/tests.md', heading: 'Running the tests', lang: 'sh', by: 'test/system/tests-doc.test.ts' },
  { page: 'docs/agents.md', heading: 'Letting agents in', lang: 'yaml', by: 'test/unit/gateway/agents/agents-doc.test.ts' },
  { page: 'docs/agents.md', heading: 'Directories: fetched, pinned, and their outages', lang: 'yaml', by: 'test/unit/gateway/agents/agents-doc.test.ts' },
  { page: 'docs/identity-providers.md', heading: 'One issuer: four variables', lang: 'sh', by: 'test/unit/gateway/idp/issuers-doc.test.ts' },
  { page: 'docs/identity-providers.md', heading: 'The issuers file', lang: 'yaml', by: 'test/unit/gateway/idp/issuers-doc.test.ts' },
  { page: 'docs/identity-providers.md', heading: 'Configurations for common IdPs', lang: 'yaml', by: 'test/unit/gateway/idp/issuers-doc.test.ts' },
  { page: 'docs/identity-providers.md', heading: 'The portal\'s login', lang: 'yaml', by: 'test/unit/gateway/idp/issuers-doc.test.ts' },
  { page: 'docs/identity-providers.md', heading: 'The CA keygate trusts', lang: 'sh', by: 'test/system/idp-ca.test.ts' },
  { page: 'docs/decision/nginx.md', heading: 'keygate\'s side', lang: 'sh', by: 'test/system/decision-nginx.test.ts' },
  { page: 'docs/decision/nginx.md', heading: 'The configuration', lang: 'nginx', by: 'test/system/decision-nginx.test.ts' },
  { page: 'docs/decision/nginx.md', heading: 'Where clients log in and register keys', lang: 'nginx', by: 'test/system/decision-nginx.test.ts' },
  { page: 'docs/decision/nginx.md', heading: 'Protected resources', lang: 'nginx', by: 'test/system/resource-server.test.ts' },
  { page: 'docs/resource-server.md', heading: 'Naming resources', lang: 'yaml', by: 'test/unit/gateway/proxy/route-file-resources.test.ts' },
  { page: 'docs/mcp.md', heading: 'A route file', lang: 'yaml', by: 'test/unit/gateway/proxy/route-file-mcp.test.ts' },
  { page: 'docs/decision/envoy.md', heading: 'The Envoy configuration', lang: 'yaml', by: 'test/system/decision-dialects.test.ts' },
  { page: 'docs/decision/envoy.md', heading: 'keygate\'s settings', lang: 'sh', by: 'test/system/decision-dialects.test.ts' },
  { page: 'docs/decision/traefik.md', heading: 'The dynamic configuration', lang: 'yaml', by: 'test/system/decision-dialects.test.ts' },
  { page: 'docs/decision/traefik.md', heading: 'keygate\'s settings', lang: 'sh', by: 'test/system/decision-dialects.test.ts' },
  { page: 'docs/decision/ingress-nginx.md', heading: 'The Ingress and its ConfigMap', lang: 'yaml', by: 'test/system/decision-dialects.test.ts' },
  { page: 'docs/decision/ingress-nginx.md', heading: 'Real statuses: the server-snippet', lang: 'yaml', by: 'test/system/decision-dialects.test.ts' },
  { page: 'docs/decision/ingress-nginx.md', heading: 'keygate\'s settings', lang: 'sh', by: 'test/system/decision-dialects.test.ts' },
  { page: 'client/README.md', heading: 'Upstreams behind decision mode: checking the body', lang: 'js', by: 'test/system/forwarded-digest.test.ts' },
  { page: 'docs/decision/caddy.md', heading: 'The Caddyfile', lang: 'caddyfile', by: 'test/system/decision-caddy.test.ts' },
  { page: 'docs/decision/caddy.md', heading: 'keygate\'s settings', lang: 'sh', by: 'test/system/decision-caddy.test.ts' },
  { page: 'docs/decision/caddy.md', heading: 'MCP routes', lang: 'caddyfile', by: 'test/system/decision-caddy.test.ts' },
  { page: 'docs/decision/nginx.md', heading: 'MCP routes', lang: 'nginx', by: 'test/system/decision-nginx.test.ts' },
  { page: 'docs/mcp-quickstart.md', heading: '1. The identity provider', lang: 'yaml', by: 'test/system/mcp-quickstart.test.ts' },
  { page: 'docs/mcp-quickstart.md', heading: '2. The route file', lang: 'yaml', by: 'test/system/mcp-quickstart.test.ts' }
]

const ROOT = new URL('../../', import.meta.url)
const PAGES = ['README.md', 'SECURITY.md', 'client/README.md',
  ...readdirSync(new URL('docs/', ROOT), { recursive: true, encoding: 'utf8' }).filter((name) => name.endsWith('.md')).sort().map((name) => `docs/${name}`)]
const where = (block: DocBlock): string => `${block.page}, "${block.heading}", \`\`\`${block.lang}`

t.test('every block is of a language this inventory knows', async (t) => {
  const unknown = PAGES.flatMap(allDocBlocks).filter((block) => !RUNNABLE.has(block.lang) && !SHOWN.has(block.lang))
  t.same(unknown.map(where), [], 'a new language: add it to RUNNABLE (and claim its blocks) or to SHOWN')
})

t.test('every block a reader runs is run by a test', async (t) => {
  const claimed = new Set(CLAIMS.flatMap((claim) => docBlocks(claim.page, claim.heading, claim.lang).map((text) => `${claim.page}\0${text}`)))
  const unclaimed = PAGES.flatMap(allDocBlocks).filter((block) => RUNNABLE.has(block.lang) && !claimed.has(`${block.page}\0${block.text}`))
  t.same(unclaimed.map(where), [], 'each of these needs a test that runs it, and a line in CLAIMS')
})

t.test('each claim finds its blocks, and its test reads them from the page', async (t) => {
  for (const claim of CLAIMS) {
    const label = `${claim.page}, "${claim.heading}", ${claim.lang}`
    t.ok(docBlocks(claim.page, claim.heading, claim.lang).length > 0, `${label}: the section has such a block`)
    const test = new URL(claim.by, ROOT)
    t.ok(existsSync(test), `${label}: ${claim.by} exists`)
    if (!existsSync(test)) continue
    const source = readFileSync(test, 'utf8')
    t.ok(source.includes(claim.page.split('/').pop() as string) && source.includes(claim.heading),
      `${label}: ${claim.by} names the page and the heading (it reads the block from the page, not a copy)`)
  }
})
