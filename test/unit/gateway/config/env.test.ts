import t from 'tap'
import { allowedValues, ConfigError, EnvSchema, ENV_VARIABLES, loadConfig, LOG_LEVELS, SWITCH_VALUES } from '../../../../gateway/src/config/env.js'
import { parseBootstrapUsers } from '../../../../gateway/src/config/bootstrap-users.js'
import { defaultRoutes } from '../../../../gateway/src/proxy/route.js'

t.test('defaults', async (t) => {
  const config = loadConfig({})
  t.equal(config.port, 8080)
  t.equal(config.host, '127.0.0.1')
  t.equal(config.redisUrl, undefined)
  t.equal(config.bodyLimit, 1024 * 1024)
  t.equal(config.jwt.ttlSeconds, 900)
  t.same(defaultRoutes(config.routeDefaults).map((r) => [r.prefix, r.upstream, r.auth, r.methods]), [
    ['/v1/clients/', 'http://127.0.0.1:8081', 'signed', ['GET', 'POST']],
    ['/v1/transactions/', 'http://127.0.0.1:8081', 'signed', ['GET', 'POST']]
  ])
  t.equal(config.routesFile, undefined)
  t.equal(config.watchRoutes, false)
  t.equal(config.logFormat, undefined, 'LOG_FORMAT unset: chosen by whether stdout is a terminal (lib/log-format.ts)')
  t.equal(config.passwordScryptLogN, 17, 'password hashes at OWASP\'s scrypt cost')
})

t.test('KEYGATE_PASSWORD_SCRYPT_LOG_N: 14 to 20', async (t) => {
  t.equal(loadConfig({ KEYGATE_PASSWORD_SCRYPT_LOG_N: '14' }).passwordScryptLogN, 14)
  t.equal(loadConfig({ KEYGATE_PASSWORD_SCRYPT_LOG_N: '20' }).passwordScryptLogN, 20)
  for (const value of ['13', '21', '16.5', 'low']) {
    t.throws(() => loadConfig({ KEYGATE_PASSWORD_SCRYPT_LOG_N: value }),
      { name: 'ConfigError', message: `KEYGATE_PASSWORD_SCRYPT_LOG_N: "${value}" is not allowed: use a whole number from 14 to 20` }, value)
  }
})

t.test('LOG_FORMAT: json or pretty', async (t) => {
  t.equal(loadConfig({ LOG_FORMAT: 'json' }).logFormat, 'json')
  t.equal(loadConfig({ LOG_FORMAT: 'pretty' }).logFormat, 'pretty')
  t.equal(loadConfig({ LOG_FORMAT: '' }).logFormat, undefined, 'empty is unset, as for every variable')
})

t.test('variables', async (t) => {
  const config = loadConfig({
    PORT: '9000',
    UPSTREAM_PORT: '9001',
    REDIS_URL: 'redis://r:6379',
    KEYGATE_BODY_LIMIT: '2048',
    KEYGATE_BOOTSTRAP_USERS: 'ann:pw:with:colons,bo:secret'
  })
  t.equal(config.port, 9000)
  t.equal(defaultRoutes(config.routeDefaults)[0]?.upstream, 'http://127.0.0.1:9001', 'UPSTREAM_URL defaults to the UPSTREAM_PORT on this host')
  t.equal(defaultRoutes(config.routeDefaults)[0]?.bodyLimit, 2048)
  t.equal(config.redisUrl, 'redis://r:6379')
  t.same(config.bootstrapUsers, [{ username: 'ann', password: 'pw:with:colons' }, { username: 'bo', password: 'secret' }])
  t.equal(defaultRoutes(loadConfig({ UPSTREAM_URL: 'https://api.internal:8443' }).routeDefaults)[0]?.upstream, 'https://api.internal:8443')
})

t.test('the upstream queue: connections, waiting requests and connect timeout per upstream origin', async (t) => {
  t.same(loadConfig({}).upstreams, { connections: 128, maxPending: 128, connectTimeoutMs: 5000 }, 'the defaults')
  t.same(loadConfig({ KEYGATE_UPSTREAM_CONNECTIONS: '4', KEYGATE_UPSTREAM_MAX_PENDING: '0', KEYGATE_UPSTREAM_CONNECT_TIMEOUT_MS: '250' }).upstreams,
    { connections: 4, maxPending: 0, connectTimeoutMs: 250 }, 'no queue at all is allowed: refuse as soon as every connection is busy')
  const refused = [['KEYGATE_UPSTREAM_CONNECTIONS', '0'], ['KEYGATE_UPSTREAM_MAX_PENDING', '-1'], ['KEYGATE_UPSTREAM_CONNECT_TIMEOUT_MS', '0']] as const
  for (const [name, value] of refused) {
    t.throws(() => loadConfig({ [name]: value }), { name: 'ConfigError', message: new RegExp(`^${name}: "${value}" is not allowed: use a whole number from`) })
  }
})

t.test('a whole-number variable takes digits only: a fraction or an exponent is refused, never cut down', async (t) => {
  const integers = ENV_VARIABLES.filter((name) => (EnvSchema.properties[name] as { type?: string }).type === 'integer')
  t.ok(integers.length >= 30, `${integers.length} whole-number variables`)
  for (const name of integers) {
    for (const value of ['1.5', '1e3', ' 1', '0x10']) {
      const message = new RegExp(`^${name}: "${value.replace('.', '\\.')}" is not allowed: use a whole number from`)
      t.throws(() => loadConfig({ [name]: value }), { name: 'ConfigError', message }, `${name}=${JSON.stringify(value)}`)
    }
  }
})

t.test('bad values are refused, naming the variable', async (t) => {
  const cases: Array<[Record<string, string>, RegExp]> = [
    [{ PORT: 'eighty' }, /^PORT: "eighty"/],
    [{ PORT: '70000' }, /^PORT: "70000"/],
    [{ UPSTREAM_URL: 'ftp://x' }, /^UPSTREAM_URL:/],
    [{ REDIS_URL: 'localhost:6379' }, /^REDIS_URL:/],
    [{ KEYGATE_BODY_LIMIT: '-1' }, /^KEYGATE_BODY_LIMIT:/],
    [{ LOG_LEVEL: 'loud' }, /^LOG_LEVEL:/],
    [{ KEYGATE_BOOTSTRAP_USERS: 'ann' }, /^KEYGATE_BOOTSTRAP_USERS: entry 1 is not name:password/],
    [{ KEYGATE_BOOTSTRAP_USERS: 'a b:pw' }, /^KEYGATE_BOOTSTRAP_USERS: entry 1 has no valid username/]
  ]
  for (const [env, message] of cases) {
    t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env))
  }
  t.ok(new ConfigError('x') instanceof Error)
  t.equal(loadConfig({ REDIS_URL: 'REDIS://r:6379' }).redisUrl, 'REDIS://r:6379', 'the scheme is case-insensitive')
})

t.test('switches take true, false, on and off, each variable alike', async (t) => {
  const switches: Array<[variable: string, read: (c: ReturnType<typeof loadConfig>) => boolean, byDefault: boolean]> = [
    ['KEYGATE_ROUTES_WATCH', (c) => c.watchRoutes, false],
    ['KEYGATE_DOCS', (c) => c.docs, true],
    ['KEYGATE_STRICT_REQUEST_LINE', (c) => c.server.strictRequestLine, false]
  ]
  const spellings: Array<[string, boolean]> = [['true', true], ['on', true], ['false', false], ['off', false]]
  t.same(spellings.map(([value]) => value).sort(), [...SWITCH_VALUES].sort(), 'every spelling is in the table')
  for (const [variable, read, byDefault] of switches) {
    t.equal(read(loadConfig({})), byDefault, `${variable} unset`)
    for (const [value, on] of spellings) t.equal(read(loadConfig({ [variable]: value })), on, `${variable}=${value}`)
    for (const value of ['yes', '1', 'TRUE', 'enabled']) {
      t.throws(() => loadConfig({ [variable]: value }), {
        name: 'ConfigError',
        message: `${variable}: "${value}" is not allowed: use one of true, false, on or off`
      }, `${variable}=${value} is refused, naming the spellings`)
    }
  }
})

t.test('a refused value is answered with what the variable allows', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ LOG_LEVEL: 'verbose' }, 'LOG_LEVEL: "verbose" is not allowed: use one of fatal, error, warn, info, debug, trace or silent'],
    [{ LOG_LEVEL: 'INFO' }, 'LOG_LEVEL: "INFO" is not allowed: use one of fatal, error, warn, info, debug, trace or silent'],
    [{ LOG_FORMAT: 'text' }, 'LOG_FORMAT: "text" is not allowed: use one of json or pretty'],
    [{ LOG_FORMAT: 'JSON' }, 'LOG_FORMAT: "JSON" is not allowed: use one of json or pretty'],
    [{ KEYGATE_DOCS: 'yes' }, 'KEYGATE_DOCS: "yes" is not allowed: use one of true, false, on or off'],
    [{ KEYGATE_USAGE_ANALYTICS: 'no' }, 'KEYGATE_USAGE_ANALYTICS: "no" is not allowed: use one of true, false, on or off'],
    [{ KEYGATE_STRICT_REQUEST_LINE: 'strict' }, 'KEYGATE_STRICT_REQUEST_LINE: "strict" is not allowed: use one of true, false, on or off'],
    [{ KEYGATE_ROUTES_WATCH: '1' }, 'KEYGATE_ROUTES_WATCH: "1" is not allowed: use one of true, false, on or off'],
    [{ KEYGATE_TRACE_PARENT: 'trust' }, 'KEYGATE_TRACE_PARENT: "trust" is not allowed: use one of ignore or continue'],
    [{ KEYGATE_TRUSTED_PROXY_HEADER: 'x-real-ip' }, 'KEYGATE_TRUSTED_PROXY_HEADER: "x-real-ip" is not allowed: use one of x-forwarded-for or forwarded'],
    [{ KEYGATE_WORKERS: 'many' }, 'KEYGATE_WORKERS: "many" is not allowed: use auto, or a number of processes from 1 to 256'],
    [{ KEYGATE_WORKERS: '0' }, 'KEYGATE_WORKERS: "0" is not allowed: use auto, or a number of processes from 1 to 256'],
    [{ PORT: 'eighty' }, 'PORT: "eighty" is not allowed: use a whole number from 0 to 65535'],
    [{ KEYGATE_TOKEN_TTL_SECONDS: '10' }, 'KEYGATE_TOKEN_TTL_SECONDS: "10" is not allowed: use a whole number from 30 to 86400'],
    [{ UPSTREAM_URL: 'ftp://x' }, 'UPSTREAM_URL: "ftp://x" is not allowed: use an http:// or https:// URL'],
    [{ REDIS_URL: 'localhost:6379' }, 'REDIS_URL: the value given is not allowed: use a redis:// or rediss:// URL'],
    [{ KEYGATE_REDIS_PREFIX: 'p'.repeat(101) }, `KEYGATE_REDIS_PREFIX: "${'p'.repeat(101)}" is not allowed: use a prefix of at most 100 characters`]
  ]
  for (const [env, message] of cases) t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env))
  t.same(LOG_LEVELS, ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])

  // Every variable with a list of values is in the table above, and every variable's refusal says
  // what it takes instead of TypeBox's words.
  const listed = ENV_VARIABLES.filter((name) => Array.isArray(EnvSchema.properties[name].anyOf))
  t.same(listed.sort(), ['KEYGATE_DOCS', 'KEYGATE_ROUTES_WATCH', 'KEYGATE_STRICT_REQUEST_LINE', 'KEYGATE_TRACE_PARENT', 'KEYGATE_TRUSTED_PROXY_HEADER',
    'KEYGATE_USAGE_ANALYTICS', 'LOG_FORMAT', 'LOG_LEVEL'],
  'the variables that take a list of values')
  for (const name of listed) t.ok(cases.some(([env]) => name in env), `${name} has a case`)
  for (const name of ENV_VARIABLES) {
    const schema = EnvSchema.properties[name]
    const constrained = schema.type !== 'string' || schema.pattern !== undefined || schema.maxLength !== undefined
    if (constrained) t.type(allowedValues(schema), 'string', `${name} says what it allows`)
  }
})

t.test('trusted identity providers: an issuers file, or one issuer from KEYGATE_OIDC_*, not both', async (t) => {
  t.same(loadConfig({}).identityProviders, { file: undefined, oidc: undefined }, 'none by default')
  t.same(loadConfig({ KEYGATE_ISSUERS: '/etc/keygate/issuers.yaml' }).identityProviders, { file: '/etc/keygate/issuers.yaml', oidc: undefined })
  t.same(loadConfig({ KEYGATE_OIDC_ISSUER: 'https://login.example.com', KEYGATE_OIDC_AUDIENCE: 'keygate' }).identityProviders.oidc,
    { issuer: 'https://login.example.com', audience: 'keygate', name: undefined, jwksUri: undefined })
  t.throws(() => loadConfig({ KEYGATE_OIDC_ISSUER: 'https://login.example.com' }), { name: 'ConfigError', message: /^KEYGATE_OIDC_AUDIENCE is not set: / })
  t.throws(() => loadConfig({ KEYGATE_OIDC_AUDIENCE: 'keygate' }), { name: 'ConfigError', message: /^KEYGATE_OIDC_ISSUER is not set: / })
  const portal = loadConfig({
    KEYGATE_OIDC_ISSUER: 'https://login.example.com', KEYGATE_OIDC_AUDIENCE: 'keygate', KEYGATE_OIDC_PORTAL_CLIENT_ID: 'portal', KEYGATE_OIDC_PORTAL_CLIENT_SECRET: 'shh'
  }).identityProviders.oidc
  t.equal(portal?.portalClientId, 'portal', 'the portal\'s client at that issuer')
  t.equal(portal?.portalClientSecret?.(), 'shh', 'and its secret, behind a function')
  t.notMatch(JSON.stringify(portal), /shh/, 'in no JSON of the configuration')
  t.throws(() => loadConfig({ KEYGATE_OIDC_ISSUER: 'https://a', KEYGATE_OIDC_AUDIENCE: 'k', KEYGATE_OIDC_PORTAL_CLIENT_SECRET: 'shh' }),
    { name: 'ConfigError', message: /^KEYGATE_OIDC_PORTAL_CLIENT_SECRET is set without KEYGATE_OIDC_PORTAL_CLIENT_ID/ })
  t.throws(() => loadConfig({ KEYGATE_ISSUERS: 'x.yaml', KEYGATE_OIDC_ISSUER: 'https://a', KEYGATE_OIDC_AUDIENCE: 'k' }),
    { name: 'ConfigError', message: /^KEYGATE_ISSUERS and KEYGATE_OIDC_\* both name trusted issuers/ })
  t.throws(() => loadConfig({ KEYGATE_OIDC_NAME: 'Corp' }), { name: 'ConfigError', message: /^KEYGATE_OIDC_NAME: "Corp" is not allowed: use lower-case letters/ })
})

t.test('traces: on only when the OTEL_* variables say so (config/tracing.ts)', async (t) => {
  t.equal(loadConfig({}).tracing, undefined, 'off by default')
  t.same(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing, { traceParent: 'ignore', protocol: 'http/protobuf' })
  t.same(loadConfig({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c/v1/traces', KEYGATE_TRACE_PARENT: 'continue' }).tracing,
    { traceParent: 'continue', protocol: 'http/protobuf' })
  t.same(loadConfig({ OTEL_TRACES_EXPORTER: 'otlp' }).tracing, { traceParent: 'ignore', protocol: 'http/protobuf' })
  t.equal(loadConfig({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c' }).tracing, undefined)
  t.equal(loadConfig({ OTEL_SDK_DISABLED: 'true', OTEL_TRACES_EXPORTER: 'otlp' }).tracing, undefined)
  t.equal(loadConfig({ KEYGATE_TRACE_PARENT: 'continue' }).tracing, undefined, 'the setting alone turns nothing on')
})

t.test('traces: the OTLP protocol, OTEL_EXPORTER_OTLP_TRACES_PROTOCOL over OTEL_EXPORTER_OTLP_PROTOCOL, checked at start', async (t) => {
  const on = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }
  const protocol = (env: Record<string, string>): string | undefined => loadConfig({ ...on, ...env }).tracing?.protocol
  t.equal(protocol({}), 'http/protobuf', 'the specification\'s default')
  t.equal(protocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json' }), 'http/json')
  t.equal(protocol({ OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json' }), 'http/json')
  t.equal(protocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }), 'http/protobuf',
    'the traces\' own wins')
  t.equal(protocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: '' }), 'http/json', 'an empty one is unset')
  t.equal(protocol({ OTEL_EXPORTER_OTLP_PROTOCOL: ' HTTP/JSON\n' }), 'http/json', 'trimmed, in any case')
  const grpc = 'is not allowed: keygate sends its spans over OTLP/HTTP only (no gRPC exporter is built in): ' +
    'use http/protobuf (the default) or http/json, to the collector\'s OTLP/HTTP port (4318; 4317 is its gRPC port)'
  const refused: Array<[Record<string, string>, string]> = [
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }, `OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" ${grpc}`],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: ' gRPC ' }, `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: " gRPC " ${grpc}`],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'protobuf' }, 'OTEL_EXPORTER_OTLP_PROTOCOL: "protobuf" is not allowed: use http/protobuf (the default) or http/json'],
    [{ OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'json' },
      'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "json" is not allowed: use http/protobuf (the default) or http/json']
  ]
  for (const [env, message] of refused) t.throws(() => loadConfig({ ...on, ...env }), new ConfigError(message), JSON.stringify(env))
  t.equal(protocol({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf' }), 'http/protobuf',
    'the general one is not read when the traces\' own is set')
  t.equal(loadConfig({ OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc' }).tracing, undefined, 'tracing off: not read (it may be meant for another program)')
})

t.test('an error never quotes a secret', async (t) => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ REDIS_URL: 'redis//:S3cretRedisPass@db:6379' }, 'S3cretRedisPass'],
    [{ KEYGATE_BOOTSTRAP_USERS: 'alice=Hunter2!x' }, 'Hunter2'],
    [{ KEYGATE_BOOTSTRAP_USERS: 'alice:pa,ss-word1' }, 'ss-word1'],
    [{ KEYGATE_BOOTSTRAP_USERS: 'ok:fine-password,bad user:Sekr1t' }, 'Sekr1t']
  ]
  for (const [env, secret] of cases) {
    let message = ''
    try { loadConfig(env) } catch (err) { message = (err as Error).message }
    t.ok(message.length > 0, `${JSON.stringify(Object.keys(env))} is refused`)
    t.notOk(message.includes(secret), `the message does not hold ${secret}: ${message}`)
  }
  t.same(parseBootstrapUsers(''), [])
  t.same(parseBootstrapUsers(undefined), [])
})

t.test('Redis Sentinel and Redis Cluster', async (t) => {
  t.same(loadConfig({
    KEYGATE_REDIS_SENTINELS: 's1:26380, s2,[::1]:26381',
    KEYGATE_REDIS_SENTINEL_MASTER: 'mymaster',
    KEYGATE_REDIS_SENTINEL_PASSWORD: 'sentinel-pw',
    KEYGATE_REDIS_PASSWORD: 'data-pw'
  }).redisTopology, {
    mode: 'sentinel',
    sentinels: [{ host: 's1', port: 26380 }, { host: 's2', port: 26379 }, { host: '::1', port: 26381 }],
    masterName: 'mymaster',
    sentinelPassword: 'sentinel-pw',
    username: undefined,
    password: 'data-pw'
  }, 'sentinels (26379 by default), the master name and the passwords')
  const cluster = loadConfig({ KEYGATE_REDIS_CLUSTER_NODES: 'n1:7000,redis_2', KEYGATE_REDIS_USERNAME: 'keygate', KEYGATE_REDIS_PASSWORD: 'pw' })
  t.same(cluster.redisTopology, { mode: 'cluster', nodes: [{ host: 'n1', port: 7000 }, { host: 'redis_2', port: 6379 }], username: 'keygate', password: 'pw' },
    'seed nodes (6379 by default) and the credentials')
  t.equal(cluster.redisUrl, undefined)
  t.equal(loadConfig({ REDIS_URL: 'redis://r:6379' }).redisTopology, undefined, 'REDIS_URL alone: one node, as before')

  const refused: Array<[Record<string, string>, RegExp]> = [
    [{ REDIS_URL: 'redis://r', KEYGATE_REDIS_CLUSTER_NODES: 'n1' }, /^REDIS_URL and KEYGATE_REDIS_CLUSTER_NODES are set: set exactly one of/],
    [
      { KEYGATE_REDIS_SENTINELS: 's1', KEYGATE_REDIS_SENTINEL_MASTER: 'm', KEYGATE_REDIS_CLUSTER_NODES: 'n1' },
      /^KEYGATE_REDIS_SENTINELS and KEYGATE_REDIS_CLUSTER_NODES are set/
    ],
    [{ KEYGATE_REDIS_SENTINELS: 's1' }, /^KEYGATE_REDIS_SENTINEL_MASTER: required with KEYGATE_REDIS_SENTINELS/],
    [{ KEYGATE_REDIS_SENTINEL_MASTER: 'm' }, /^KEYGATE_REDIS_SENTINEL_MASTER: set, but KEYGATE_REDIS_SENTINELS is not/],
    [{ KEYGATE_REDIS_CLUSTER_NODES: 'n1', KEYGATE_REDIS_SENTINEL_PASSWORD: 'x' }, /^KEYGATE_REDIS_SENTINEL_PASSWORD: set, but KEYGATE_REDIS_SENTINELS is not/],
    [{ REDIS_URL: 'redis://r', KEYGATE_REDIS_PASSWORD: 'x' }, /^KEYGATE_REDIS_PASSWORD: set, but .*write credentials in the URL/],
    [{ KEYGATE_REDIS_USERNAME: 'u' }, /^KEYGATE_REDIS_USERNAME: set, but no Redis is configured/],
    [{ KEYGATE_REDIS_CLUSTER_NODES: 'n1,,n2' }, /^KEYGATE_REDIS_CLUSTER_NODES: entry 2 is not host or host:port/],
    [{ KEYGATE_REDIS_CLUSTER_NODES: 'n1:0' }, /^KEYGATE_REDIS_CLUSTER_NODES: entry 1 is not/],
    [{ KEYGATE_REDIS_CLUSTER_NODES: 'n1:70000' }, /^KEYGATE_REDIS_CLUSTER_NODES: entry 1 is not/],
    [{ KEYGATE_REDIS_SENTINELS: 'redis://s1:26379', KEYGATE_REDIS_SENTINEL_MASTER: 'm' }, /^KEYGATE_REDIS_SENTINELS: entry 1 is not .*no scheme/],
    [{ KEYGATE_REDIS_CLUSTER_NODES: 'n1', KEYGATE_REDIS_PREFIX: '{kg}:' }, /^KEYGATE_REDIS_PREFIX: must not contain \{ or \} with KEYGATE_REDIS_CLUSTER_NODES/]
  ]
  for (const [env, message] of refused) t.throws(() => loadConfig(env), { name: 'ConfigError', message }, JSON.stringify(env))
  t.equal(loadConfig({ REDIS_URL: 'redis://r', KEYGATE_REDIS_PREFIX: '{kg}:' }).redisPrefix, '{kg}:', 'braces are the operator\'s own business on one node')

  // A URL with a password pasted into a node list, or a password beside REDIS_URL, is never quoted.
  for (const env of [
    { KEYGATE_REDIS_CLUSTER_NODES: 'redis://:Hunter2pw@n1:6379' },
    { KEYGATE_REDIS_SENTINELS: 's1:Hunter2pw', KEYGATE_REDIS_SENTINEL_MASTER: 'm' },
    { REDIS_URL: 'redis://r', KEYGATE_REDIS_PASSWORD: 'Hunter2pw' },
    { REDIS_URL: 'redis://r', KEYGATE_REDIS_CLUSTER_NODES: 'n1', KEYGATE_REDIS_PASSWORD: 'Hunter2pw' },
    { KEYGATE_REDIS_SENTINEL_PASSWORD: 'Hunter2pw' }
  ]) {
    let message = ''
    try { loadConfig(env) } catch (err) { message = (err as Error).message }
    t.ok(message.length > 0, `${JSON.stringify(Object.keys(env))} is refused`)
    t.notOk(message.includes('Hunter2'), `the message does not hold the password: ${message}`)
  }
})

t.test('keys per user and the budget of failed signature checks', async (t) => {
  const defaults = loadConfig({})
  t.equal(defaults.maxKeysPerUser, 20)
  t.same(defaults.signatureFailures, {}, 'unset: the budget\'s own defaults (auth/signature-budget.ts)')
  const set = loadConfig({
    KEYGATE_MAX_KEYS_PER_USER: '5',
    KEYGATE_SIGNATURE_FAILURE_LIMIT: '1000000000',
    KEYGATE_SIGNATURE_FAILURE_WINDOW_SECONDS: '60',
    KEYGATE_SIGNATURE_FAILURE_DELAY_MS: '0',
    KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_LIMIT: '3',
    KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES: '100'
  })
  t.equal(set.maxKeysPerUser, 5)
  t.same(set.signatureFailures, { limit: 1_000_000_000, windowSeconds: 60, delayMs: 0, attackedKeyLimit: 3, attackedKeyAddresses: 100 })
  t.same(loadConfig({ KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES: '1' }).signatureFailures, { attackedKeyAddresses: 1 }, 'one address may be enough')
  for (const value of ['0', '101', '2.5', 'three']) {
    t.throws(() => loadConfig({ KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES: value }),
      { name: 'ConfigError', message: `KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES: "${value}" is not allowed: use a whole number from 1 to 100` },
      `KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_ADDRESSES=${value} is refused, naming the variable`)
  }
  for (const [name, value] of [['KEYGATE_MAX_KEYS_PER_USER', '0'], ['KEYGATE_SIGNATURE_FAILURE_LIMIT', '0'],
    ['KEYGATE_SIGNATURE_FAILURE_WINDOW_SECONDS', '0'], ['KEYGATE_SIGNATURE_FAILURE_DELAY_MS', '-1'],
    ['KEYGATE_SIGNATURE_FAILURE_ATTACKED_KEY_LIMIT', '0']] as const) {
    t.throws(() => loadConfig({ [name]: value }), { name: 'ConfigError', message: new RegExp(`^${name}: "${value}" is not allowed: use a whole number`) })
  }
})
