// The command line of `npm run bench`.
import { parseArgs } from 'node:util'
import { KEY_TYPES, type KeyType } from '../client/src/protocol/index.js'
import { ENV_VARIABLES } from '../gateway/src/config/env.js'
import { BENCH_SCHEMES, type BenchScheme } from './signing.js'

export const SCENARIOS = ['get', 'post', 'token', 'register', 'mix', 'reject', 'flood', 'decision', 'mcp', 'dpop'] as const
export type Scenario = typeof SCENARIOS[number]
export const CONFIG_IDS = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'j', 'k', 'l', 'm', 'n'] as const
export type ConfigId = typeof CONFIG_IDS[number]
/** what runs without --only: f (a rate-limited route), i (an IdP's token) and j (a signed agent) are asked for by name */
export const DEFAULT_CONFIG_IDS: readonly ConfigId[] = ['a', 'b', 'c', 'd', 'e']
/** --scenario decision: nginx alone (g), nginx asking keygate (h), keygate inline on the same store (d) */
export const DECISION_CONFIG_IDS: readonly ConfigId[] = ['d', 'g', 'h']
/** --scenario mcp: keygate forwarding MCP tools/calls on a public route (e), and on a public MCP route that reads and judges each (k) */
export const MCP_CONFIG_IDS: readonly ConfigId[] = ['e', 'k']
/** --scenario dpop: keygate's own token on a bearer route, as Bearer (l), bound to an ES256 key (m) and to an EdDSA key (n), a new proof each request */
export const DPOP_CONFIG_IDS: readonly ConfigId[] = ['l', 'm', 'n']
/** j's agent signs RFC 9421 with an Ed25519 key (Web Bot Auth); with j, the others' requests are signed so too */
export const AGENT_SCHEME: BenchScheme = 'rfc9421'
export const AGENT_KEY_TYPE: KeyType = 'ed25519'
export const REJECT_KINDS = ['all', 'bad-signature', 'stale', 'unknown-key'] as const
export type RejectKind = typeof REJECT_KINDS[number]

export interface BenchOptions {
  duration: number
  warmup: number
  connections: number
  /**
   * a fixed overall rate (requests/s over all connections) instead of as fast as possible; 'half':
   * half of the bare proxy's (b) peak, measured first in the same run (the latency target's load)
   */
  rate: number | 'half' | undefined
  rounds: number
  scenario: Scenario
  /** reject: the share of requests that are refused (bad signature, stale timestamp, unknown key) */
  rejectShare: number
  /** reject: which refusals; all: the three in turn */
  rejectKind: RejectKind
  /** the signature scheme of the signed requests: the seed's X-API-* or RFC 9421 */
  scheme: BenchScheme
  /** the type of the bench's signing key */
  keyType: KeyType
  only: ConfigId[]
  json: boolean
  /** where the JSON and HTML reports go */
  out: string
  /** write a V8 CPU profile of each proxy process (b, c, d, e) under `out` */
  cpuProf: boolean
  /** LOG_LEVEL of the keygate processes (their log lines go to /dev/null) */
  logLevel: string
  /** KEYGATE_WORKERS of keygate on Redis (c, f); the embedded store (d) is always one process */
  workers: number
  /** --trace: OpenTelemetry traces of the gateways started here, to an OTLP sink of the bench's: off, every request, or a share */
  trace: 'off' | 'all' | number
  /** --env NAME=VALUE: more keygate variables for the gateways started here */
  gatewayEnv: Record<string, string>
  /** --scenario decision: the nginx binary (g, h) */
  nginx: string | undefined
  target: { url: string; user: string; password: string } | undefined
}

export const USAGE = `Usage: npm run bench -- [options]

Load-tests keygate's signed API and, with no --url, compares in one run, alternating rounds:
  a  the example service (upstream-stub) alone
  b  a bare fastify 5 + @fastify/http-proxy in front of it, no auth
  c  keygate in front of it, Redis store (REDIS_URL or redis://127.0.0.1:6379, own key prefix)
  d  keygate in front of it, embedded store
  e  keygate in front of it, a public route (no auth): its proxy hop alone
  f  (only with --only) as c, with one per-key rate limit on the signed routes, too high to
     ever refuse (1,000,000,000 per minute): f - c is what counting a request costs
  i  (only with --only) as c, the bearer token an identity provider's instead of keygate's:
     an RS256 JWT access token from an issuer the bench serves on loopback (its discovery
     document and JWKS, which keygate fetches once and caches; KEYGATE_OIDC_ISSUER):
     i - c is what an IdP's token costs beyond keygate's own
  j  (only with --only, --scenario get) keygate on Redis, /v1/clients/ an agent route: GETs
     signed by a Web Bot Auth agent (RFC 9421, tag="web-bot-auth", Ed25519, keyid its JWK
     thumbprint, covering @authority and signature-agent, a nonce each: every one signed for
     one request), its key pinned in an agents file (KEYGATE_AGENT_DIRECTORIES: no fetch);
     with j the other configurations sign RFC 9421 with the same Ed25519 key (--scheme
     rfc9421 --key ed25519, the defaults then; another is refused): j - c is what an agent's
     signature costs beyond a registered key's
and with --scenario decision (which runs d, g and h):
  g  nginx in front of the example service, no auth
  h  nginx asking keygate's decision listener (auth_request, the configuration of
     docs/decision/nginx.md), then passing the request to the example service; embedded store
and with --scenario mcp (which runs e and k), to an MCP server of the bench's
(bench/mcp-upstream.ts) instead of the example service:
  e  keygate, the MCP path a public route: its proxy hop alone
  k  keygate, the MCP path a public MCP route (docs/mcp.md): each body read once, strictly,
     and its tool judged against a policy of globs, exact names and deny: k - e is what
     JSON-RPC inspection and per-tool authorization cost
and with --scenario dpop (which runs l, m and n), keygate on Redis, /v1/clients/ a bearer
route (a token, no signature), GETs with keygate's own token:
  l  sent as Bearer: the token alone
  m  bound to an ES256 (P-256) key at login, sent as DPoP with a new proof each (RFC 9449)
  n  the same with an EdDSA (Ed25519) key: m - l and n - l are what a proof costs
each in its own process on a free loopback port. Prints first the auth layer's cost (c's CPU
per request - e's, in us) and the signed requests one gateway core serves per second (1,000,000 /
c's CPU us per request), with the machine and how busy it was; then medians over the rounds:
requests/s, the ratio to (b), latency p50/p90/p99/max, responses by status, and the CPU time per
request of the process the load goes to (the proxy; for (a) the service itself) and of the upstream.

Options:
  --duration S         measured seconds per round and configuration      (default 5)
  --warmup S           unmeasured seconds before each measurement        (default 1)
  --connections N      concurrent keep-alive connections                 (default 32)
  --rounds N           alternating rounds; the report shows medians      (default 3)
  --rate R             a fixed total rate, requests/s, instead of as fast as the
                       connections go; "half": half of (b)'s peak, measured first
                       (compare latency at the same load: p99 at half load)
  --scenario NAME      get     signed GET /v1/clients/                   (default)
                       post    signed POST /v1/clients/, each request signed once
                       token   POST /v1/auth/token (keygate only: c, d or --url; the
                               gateways started here lift the per-user login limit, which
                               one user logging in on every connection would trip)
                       register POST /v1/api-keys (keygate only): 64 fresh RSA keys,
                               each registered once (201), then again (409 DUPLICATE_KEY,
                               after the same parsing, proof and store round trip); the
                               gateways started here lift KEYGATE_MAX_KEYS_PER_USER
                       mix     4 signed GETs to 1 signed POST
                       reject  signed GETs, --reject-share of them refused: bad signature,
                               stale timestamp, unknown key (in turn); the gateways started
                               here lift the budget of failed signature checks per address
                               (KEYGATE_SIGNATURE_FAILURE_LIMIT), which would refuse them all
                       flood   signed GETs from 127.0.0.1 alone, then while another process
                               sends bad signatures (same key and token) from 127.0.0.2 on as
                               many connections, as fast as they are answered (keygate only:
                               c, d); reports good traffic under the flood against alone
                       decision signed GETs through nginx alone (g), through nginx asking
                               keygate's decision listener (h), and to keygate inline (d), all
                               on the same example service; reports each one's req/s, the
                               ratios h/g and d/g, and keygate's CPU per request deciding (h)
                               against proxying (d). Needs nginx (apt-get install nginx-light)
                       mcp     MCP tools/call POSTs (about 200 bytes, JSON-RPC, protocol
                               2025-06-18) to /mcp, through a public route (e) and a public MCP
                               route (k), both to the bench's MCP server; reports k's CPU per
                               call beyond e's
                       dpop    GET /v1/clients/ on a bearer route with keygate's own token: as
                               Bearer (l), bound to an ES256 key (m) or an EdDSA key (n) with a
                               new proof each, made before each measurement and each sent once;
                               reports m's and n's CPU per request beyond l's
  --reject-share F     the refused share for --scenario reject, 0 to 1   (default 0.5)
  --reject-kind K      all (in turn) | bad-signature | stale | unknown-key (default all)
  --scheme S           how requests are signed: seed (X-API-Key, X-API-Timestamp,
                       X-API-Signature) or rfc9421 (Signature-Input, Signature and
                       Content-Digest: @method, @path, a body's digest)  (default seed)
  --key T              the signing key: rsa (2048 bits), ed25519 or p256     (default rsa)
  --only a,...,n       run only these configurations                     (default a,b,c,d,e;
                       with --scenario decision d,g,h, with --scenario mcp e,k, with
                       --scenario dpop l,m,n: only those)
  --url URL            load an existing keygate instead (registers a fresh key for --user)
  --user U             with --url: the user to log in as
  --password P         with --url: that user's password
  --out DIR            where the JSON and HTML reports go       (default <tmpdir>/keygate-bench)
  --cpu-prof           write a CPU profile (.cpuprofile: Chrome DevTools, speedscope) of each
                       proxy process (b, c, d, e) over the whole run, under --out/profiles-<time>
  --log-level LEVEL    LOG_LEVEL of the keygate processes; their log lines go to /dev/null
                                                                         (default warn)
  --workers N          KEYGATE_WORKERS of keygate on Redis (c): N worker processes on one
                       port; its CPU per request then counts them all. (d) stays one process
                       (the embedded store cannot be shared), and so do (a) and (b), so the
                       default keeps the comparison like for like. Each worker warms up on
                       its share of the load: give it a longer --warmup (5)      (default 1)
  --env NAME=VALUE     a keygate variable for the gateways started here (c, d, e), again for
                       more: --env KEYGATE_SIGNATURE_FAILURE_LIMIT=1000000000 (no budget)
  --trace T            OpenTelemetry traces of the gateways started here (c, d, e, f), exported
                       over OTLP/HTTP to a sink in the bench that discards them: off, all
                       (every request), or a share such as 1% (parentbased_traceidratio);
                       OTEL_BSP_* of the bench's environment pass on      (default off)
  --nginx PATH         --scenario decision: the nginx to run, built with its auth_request
                       module                 (default /usr/sbin/nginx, else nginx on PATH)
  --json               print the results as JSON instead of the table
  --help               this text
`

/** what the bench sets on the gateways it starts, not to be set with --env */
const BENCH_OWNED_VARIABLES = ['PORT', 'HOST', 'UPSTREAM_URL', 'REDIS_URL', 'KEYGATE_REDIS_PREFIX', 'KEYGATE_BOOTSTRAP_USERS', 'KEYGATE_WORKERS',
  'KEYGATE_ROUTES', 'LOG_LEVEL', 'KEYGATE_DECISION_PORT', 'KEYGATE_DECISION_HOST', 'KEYGATE_DECISION_TRUSTED_PROXIES',
  'KEYGATE_OIDC_ISSUER', 'KEYGATE_OIDC_AUDIENCE', 'KEYGATE_OIDC_NAME', 'KEYGATE_OIDC_JWKS_URI', 'KEYGATE_ISSUERS', 'KEYGATE_AGENT_DIRECTORIES']

export class UsageError extends Error {
  override name = 'UsageError'
}

function number (name: string, raw: string | undefined, fallback: number, { min, integer }: { min: number; integer: boolean }): number {
  if (raw === undefined) return fallback
  const value = Number(raw)
  if (raw.trim() === '' || !Number.isFinite(value) || value < min || (integer && !Number.isInteger(value))) {
    throw new UsageError(`--${name}: "${raw}" is not ${integer ? 'an integer' : 'a number'} >= ${min}`)
  }
  return value
}

function traceOption (raw: string | undefined, remote: boolean): BenchOptions['trace'] {
  if (raw === undefined || raw === 'off') return 'off'
  if (remote) throw new UsageError('--trace sets the gateways started here; with --url, set OTEL_* on that keygate')
  if (raw === 'all' || raw === '100%') return 'all'
  const percent = /^([0-9]+(?:\.[0-9]+)?)%$/.exec(raw)
  const share = percent === null ? Number.NaN : Number(percent[1]) / 100
  if (!(share > 0 && share < 1)) throw new UsageError(`--trace: "${raw}" is not off, all or a share such as 1%`)
  return share
}

/** the options parseArgs reads, each a string but the flags */
const OPTIONS = {
  duration: { type: 'string' },
  warmup: { type: 'string' },
  connections: { type: 'string' },
  rounds: { type: 'string' },
  rate: { type: 'string' },
  scenario: { type: 'string' },
  'reject-share': { type: 'string' },
  'reject-kind': { type: 'string' },
  scheme: { type: 'string' },
  key: { type: 'string' },
  only: { type: 'string' },
  json: { type: 'boolean' },
  url: { type: 'string' },
  user: { type: 'string' },
  password: { type: 'string' },
  out: { type: 'string' },
  'log-level': { type: 'string' },
  'cpu-prof': { type: 'boolean' },
  trace: { type: 'string' },
  workers: { type: 'string' },
  env: { type: 'string', multiple: true },
  nginx: { type: 'string' },
  help: { type: 'boolean', short: 'h' }
} as const

type Values = ReturnType<typeof parseArgs<{ args: string[]; strict: true; allowPositionals: false; options: typeof OPTIONS }>>['values']

function parseValues (argv: string[]): Values {
  try {
    return parseArgs({ args: argv, strict: true, allowPositionals: false, options: OPTIONS }).values
  } catch (err) {
    throw new UsageError((err as Error).message)
  }
}
/** --only, checked against the scenario; with j, the signing j's agent does (RFC 9421, Ed25519) */
function configsOf (values: Values, scenario: string, scheme: string, keyType: string):
{ configs: ConfigId[]; signing: { scheme: BenchScheme; keyType: KeyType } } {
  let signing = { scheme: scheme as BenchScheme, keyType: keyType as KeyType }
  const onlyGiven = values.only !== undefined
  const byDefault = ({ decision: DECISION_CONFIG_IDS, mcp: MCP_CONFIG_IDS, dpop: DPOP_CONFIG_IDS } as Record<string, readonly ConfigId[]>)[scenario] ??
    DEFAULT_CONFIG_IDS
  const only = (values.only ?? byDefault.join(','))
    .split(',').map((id) => id.trim().toLowerCase()).filter((id) => id !== '')
  for (const id of only) if (!(CONFIG_IDS as readonly string[]).includes(id)) throw new UsageError(`--only: "${id}" is not one of ${CONFIG_IDS.join(', ')}`)
  if (only.length === 0) throw new UsageError(`--only: name at least one of ${CONFIG_IDS.join(', ')}`)
  let configs = CONFIG_IDS.filter((id) => only.includes(id))
  if (scenario === 'decision') {
    // nginx alone, nginx asking keygate, keygate inline: three ways to serve the same signed GETs
    const other = configs.filter((id) => !DECISION_CONFIG_IDS.includes(id))
    if (other.length > 0) throw new UsageError(`--scenario decision: runs ${DECISION_CONFIG_IDS.join(', ')} only; leave out ${other.join(', ')}`)
  } else if (configs.includes('g') || configs.includes('h')) {
    throw new UsageError('--only: g and h (nginx) are --scenario decision\'s')
  }
  if (scenario === 'mcp') {
    // MCP tools/calls go to the bench's MCP server, which only e and k are routed to
    const other = configs.filter((id) => !MCP_CONFIG_IDS.includes(id))
    if (other.length > 0) throw new UsageError(`--scenario mcp: runs ${MCP_CONFIG_IDS.join(', ')} only; leave out ${other.join(', ')}`)
  } else if (configs.includes('k')) {
    throw new UsageError('--only: k (an MCP route) is --scenario mcp\'s')
  }
  if (scenario === 'dpop') {
    // bound tokens and their proofs go to the bearer route of l, m and n only
    const other = configs.filter((id) => !DPOP_CONFIG_IDS.includes(id))
    if (other.length > 0) throw new UsageError(`--scenario dpop: runs ${DPOP_CONFIG_IDS.join(', ')} only; leave out ${other.join(', ')}`)
  } else if (configs.some((id) => DPOP_CONFIG_IDS.includes(id))) {
    throw new UsageError('--only: l, m and n (a bearer route, DPoP) are --scenario dpop\'s')
  }
  if (scenario === 'token' && configs.includes('i')) {
    throw new UsageError('--scenario token: logs in with a password at POST /v1/auth/token; i\'s token is an identity provider\'s: leave i out')
  }
  if (configs.includes('j')) {
    // j: agent-signed GETs; the fair comparison is c's GETs signed as j's are (RFC 9421, the same Ed25519 key), so that is what the run signs
    if (scenario !== 'get') {
      throw new UsageError(`--scenario ${scenario}: j sends GETs signed by a Web Bot Auth agent (no password login, no key to register, ` +
        'no user\'s POSTs); run j with --scenario get (the default)')
    }
    if ((values.scheme !== undefined && scheme !== AGENT_SCHEME) || (values.key !== undefined && keyType !== AGENT_KEY_TYPE)) {
      throw new UsageError('--only ...,j: j\'s agent signs RFC 9421 with an Ed25519 key, and c is compared with it signing the same way: ' +
        `--scheme ${AGENT_SCHEME} --key ${AGENT_KEY_TYPE} (the defaults with j), not --scheme ${scheme} --key ${keyType}`)
    }
    signing = { scheme: AGENT_SCHEME, keyType: AGENT_KEY_TYPE }
  }
  if (scenario === 'token' || scenario === 'register' || scenario === 'flood') {
    // token issuance and key registration are keygate's own endpoints: neither the service nor the bare proxy has one;
    // a flood of bad signatures is refused only where signatures are checked
    if (onlyGiven && configs.some((id) => id === 'a' || id === 'b' || id === 'e')) {
      throw new UsageError(`--scenario ${scenario}: only keygate answers it; use --only c,d`)
    }
    configs = configs.filter((id) => id === 'c' || id === 'd' || id === 'f' || id === 'i')
  }
  return { configs, signing }
}

/** --url, --user and --password: an existing keygate instead of the configurations */
function targetOf (values: Values): BenchOptions['target'] {
  if (values.url !== undefined) {
    if (values.only !== undefined) throw new UsageError('--url runs only that target; --only does not apply')
    if (values.user === undefined || values.password === undefined) throw new UsageError('--url needs --user and --password')
    let url: URL
    try { url = new URL(values.url) } catch { throw new UsageError(`--url: "${values.url}" is not a URL`) }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new UsageError('--url: must be http:// or https://')
    return { url: url.origin, user: values.user, password: values.password }
  } else if (values.user !== undefined || values.password !== undefined) {
    throw new UsageError('--user and --password go with --url')
  }
  return undefined
}

function rateOf (values: Values, target: BenchOptions['target'], configs: ConfigId[]): BenchOptions['rate'] {
  if (values.rate === 'half') {
    if (target !== undefined || !configs.includes('b')) {
      throw new UsageError('--rate half: needs configuration b, whose peak it halves (not with --url, and keep b in --only)')
    }
    return 'half'
  } else if (values.rate !== undefined) {
    return number('rate', values.rate, 0, { min: 1, integer: true })
  }
  return undefined
}

/** --env NAME=VALUE, each a keygate variable the bench does not set itself */
function gatewayEnvOf (settings: string[] | undefined, target: BenchOptions['target']): Record<string, string> {
  const gatewayEnv: Record<string, string> = {}
  for (const setting of settings ?? []) {
    const eq = setting.indexOf('=')
    const name = setting.slice(0, Math.max(0, eq))
    if (eq <= 0 || !(ENV_VARIABLES as readonly string[]).includes(name)) {
      throw new UsageError(`--env: "${setting}" is not NAME=VALUE with a keygate variable`)
    }
    if (BENCH_OWNED_VARIABLES.includes(name)) throw new UsageError(`--env: ${name} is set by the bench itself`)
    gatewayEnv[name] = setting.slice(eq + 1)
  }
  if (target !== undefined && Object.keys(gatewayEnv).length > 0) {
    throw new UsageError('--env sets the gateways started here; with --url, configure that keygate')
  }
  return gatewayEnv
}

/** null: --help was asked for. */
export function parseBenchArgs (argv: string[], defaultOut: string): BenchOptions | null {
  const values = parseValues(argv)
  if (values.help === true) return null

  const scenario = values.scenario ?? 'get'
  if (!(SCENARIOS as readonly string[]).includes(scenario)) throw new UsageError(`--scenario: "${scenario}" is not one of ${SCENARIOS.join(', ')}`)
  const rejectShare = number('reject-share', values['reject-share'], 0.5, { min: 0, integer: false })
  if (rejectShare > 1) throw new UsageError('--reject-share: must be from 0 to 1')
  const rejectKind = values['reject-kind'] ?? 'all'
  if (!(REJECT_KINDS as readonly string[]).includes(rejectKind)) throw new UsageError(`--reject-kind: "${rejectKind}" is not one of ${REJECT_KINDS.join(', ')}`)

  const scheme = values.scheme ?? 'seed'
  if (!(BENCH_SCHEMES as readonly string[]).includes(scheme)) throw new UsageError(`--scheme: "${scheme}" is not one of ${BENCH_SCHEMES.join(', ')}`)
  const keyType = values.key ?? 'rsa'
  if (!(KEY_TYPES as readonly string[]).includes(keyType)) throw new UsageError(`--key: "${keyType}" is not one of ${KEY_TYPES.join(', ')}`)
  const { configs, signing } = configsOf(values, scenario, scheme, keyType)
  const target = targetOf(values)
  const rate = rateOf(values, target, configs)
  const workers = number('workers', values.workers, 1, { min: 1, integer: true })
  if (target !== undefined && values.workers !== undefined) {
    throw new UsageError('--workers sets the keygate started here; with --url, set KEYGATE_WORKERS on that keygate')
  }

  if (scenario === 'flood' && target !== undefined) throw new UsageError('--scenario flood: runs against the gateways started here, not --url')
  if (scenario === 'decision' && target !== undefined) throw new UsageError('--scenario decision: runs nginx and the gateways started here, not --url')
  if (scenario === 'dpop' && target !== undefined) throw new UsageError('--scenario dpop: runs the gateways started here (a bearer route), not --url')
  if (scenario === 'mcp' && target !== undefined) throw new UsageError('--scenario mcp: runs the bench\'s MCP server and the gateways started here, not --url')
  if (values.nginx !== undefined && scenario !== 'decision') throw new UsageError('--nginx goes with --scenario decision')
  const gatewayEnv = gatewayEnvOf(values.env, target)

  const logLevel = values['log-level'] ?? 'warn'
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(logLevel)) throw new UsageError(`--log-level: "${logLevel}" is not a log level`)

  return {
    duration: number('duration', values.duration, 5, { min: 1, integer: true }),
    warmup: number('warmup', values.warmup, 1, { min: 0, integer: true }),
    connections: number('connections', values.connections, 32, { min: 1, integer: true }),
    rate,
    rounds: number('rounds', values.rounds, 3, { min: 1, integer: true }),
    scenario: scenario as Scenario,
    rejectShare,
    rejectKind: rejectKind as RejectKind,
    scheme: signing.scheme,
    keyType: signing.keyType,
    only: configs,
    json: values.json === true,
    out: values.out ?? defaultOut,
    logLevel,
    cpuProf: values['cpu-prof'] === true,
    trace: traceOption(values.trace, target !== undefined),
    workers,
    gatewayEnv,
    nginx: values.nginx,
    target
  }
}
