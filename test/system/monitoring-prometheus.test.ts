// The monitoring kit in a real Prometheus (Debian's), with the configuration of docs/monitoring.md's
// "Loading the kit" (its intervals at 1 s, its target keygate's metrics port), scraping keygate with
// two workers on the real Redis. After signed, refused and locked-out requests, Prometheus's HTTP API
// shows keygate's series with the labels docs/observability.md documents, the recording rules'
// values, every query of the Grafana dashboard as valid PromQL, and alerts firing: a flood of bad
// signatures throttled, a login lockout, a worker killed and replaced, fetches of an identity
// provider's keys failing.
import { readFileSync } from 'node:fs'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { docBlocks, docPage } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair, signBase64, signedHeaders } from '../helpers/keys.js'
import { DASHBOARD, RULES, findPrometheus, runPrometheus, type RunningPrometheus } from '../helpers/monitoring.js'
import { gone, redisEnv, startCluster } from '../helpers/process-tree.js'
import { freePort } from '../helpers/redis.js'
import { PASSWORD, login, registerKey, sendSigned, startUpstreamStub } from '../helpers/stack.js'

const found = findPrometheus()
const WAIT_MS = 15_000

interface Series { metric: Record<string, string>; value: [number, string] }
interface Alert { labels: Record<string, string>; annotations: Record<string, string>; state: string }

/** the labels each keygate_* series has by the table of docs/observability.md (a value list in parentheses is not a label) */
function documentedLabels (): Map<string, string[]> {
  const table = new Map<string, string[]>()
  for (const row of docPage('docs/observability.md').matchAll(/^\| `(keygate_\w+)` \| (\w+) \|([^|]*)\|/gm)) {
    const labels = [...(row[3] as string).replace(/\([^)]*\)/g, '').matchAll(/`(\w+)`/g)].map((m) => m[1] as string)
    table.set(row[1] as string, labels)
  }
  return table
}

/** polls `read` until `done` accepts what it gives, or fails naming `what` */
async function eventually<T> (what: string, read: () => Promise<T>, done: (value: T) => boolean): Promise<T> {
  const deadline = Date.now() + WAIT_MS
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`${what}: not within ${WAIT_MS} ms (last: ${JSON.stringify(value)})`)
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
}

const query = async (prometheus: RunningPrometheus, expr: string): Promise<Series[]> =>
  (await prometheus.api<{ result: Series[] }>('query', { query: expr })).result
const firing = async (prometheus: RunningPrometheus): Promise<Alert[]> =>
  (await prometheus.api<{ alerts: Alert[] }>('alerts')).alerts.filter((alert) => alert.state === 'firing')

t.test('Prometheus scrapes keygate with two workers: series, recording rules, dashboard queries, alerts', { skip: 'reason' in found ? found.reason : false },
  async (t) => {
    const upstream = await startUpstreamStub(t)
    const metricsPort = await freePort()
    // a trusted identity provider that does not answer: a loopback port nothing listens on
    const idp = `http://127.0.0.1:${await freePort()}`

    // the page's configuration, with 1 s intervals, the kit's rules and this keygate as its target
    const [block] = docBlocks('docs/monitoring.md', 'Loading the kit', 'yaml')
    const config = parse(block ?? '') as {
      global: Record<string, string>
      rule_files: string[]
      scrape_configs: Array<{ job_name: string; static_configs: Array<{ targets: string[] }> }>
    }
    t.same(config.rule_files, ['keygate.rules.yml'], 'the page loads the kit\'s rules')
    config.global = { scrape_interval: '1s', scrape_timeout: '1s', evaluation_interval: '1s' }
    config.rule_files = [RULES]
    const [job] = config.scrape_configs
    t.equal(job?.job_name, 'keygate', 'the job the rules expect')
    job?.static_configs.splice(0, Infinity, { targets: [`127.0.0.1:${metricsPort}`] })

    // tracing on, to a receiver that takes the spans: sampled requests leave exemplars, which this Prometheus stores
    const spans = createServer((req, res) => { req.resume().on('end', () => { res.writeHead(200, { 'content-type': 'application/json' }).end('{}') }) })
    await new Promise<void>((resolve) => spans.listen(0, '127.0.0.1', resolve))
    t.teardown(async () => { await new Promise((resolve) => spans.close(resolve)) })

    // Both at once: Prometheus starts scraping some 5 s after it starts (its discovery's first update),
    // about the time keygate takes to start its workers.
    const [prometheus, gw] = await Promise.all([
      runPrometheus(t, 'path' in found ? found.path : '', stringify(config), ['--enable-feature=exemplar-storage']),
      startCluster(t, {
        ...await redisEnv(t, 'monitoring'),
        UPSTREAM_URL: upstream,
        KEYGATE_METRICS_PORT: String(metricsPort),
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(spans.address() as AddressInfo).port}`,
        // a flood and a lockout in a few requests, counted in windows longer than the test: the verdicts
        // depend on how many requests were sent, never on how fast a busy machine sends them
        KEYGATE_SIGNATURE_FAILURE_LIMIT: '3',
        KEYGATE_SIGNATURE_FAILURE_WINDOW_SECONDS: '3600',
        KEYGATE_SIGNATURE_FAILURE_DELAY_MS: '0',
        KEYGATE_LOGIN_MAX_FAILURES_PER_USER: '1',
        KEYGATE_OIDC_ISSUER: idp,
        KEYGATE_OIDC_AUDIENCE: 'keygate',
        KEYGATE_OIDC_NAME: 'down',
        // its key set named, not discovered: a failed key set fetch is retried after 5 s, a failed discovery after 30
        KEYGATE_OIDC_JWKS_URI: `${idp}/jwks`
      })
    ])

    // scraped once before anything happens: every counter that exists at start has its 0
    await eventually('a first scrape', async () => await query(prometheus, 'keygate_worker_restarts_total'), (r) => r.length === 1)
    t.same((await eventually('the target up', async () => await query(prometheus, 'up'), (r) => r[0]?.value[1] === '1'))
      .map((s) => [s.metric.job, s.value[1]]), [['keygate', '1']], 'the target is up')

    const token = await login(gw.url, 'alice')
    const keys = rsaKeyPair()
    t.equal((await registerKey(gw.url, token, keys)).status, 201)
    const signedGet = async (): Promise<number> => (await sendSigned(gw.url, { keys, token, method: 'GET', target: '/v1/clients/' })).status
    const badSignature = async (): Promise<number> => (await send(gw.url, '/v1/clients/', {
      headers: { ...signedHeaders({ keys, token, method: 'GET', target: '/v1/clients/' }), 'x-api-signature': signBase64(keys.privateKey, 'another') }
    })).status
    // A series appears with its first count, which rate() cannot see as an increase: one request of
    // each kind, scraped, then the rest (as in a gateway that has been serving a while).
    t.same([await signedGet(), (await send(gw.url, '/v1/clients/')).status, await badSignature()], [200, 401, 401], 'signed, no token, a bad signature')
    await eventually('the first requests scraped', async () => await query(prometheus, 'keygate_auth_outcomes_total{route="/v1/clients/"}'),
      (r) => r.length === 3)
    for (let i = 0; i < 10; i++) t.equal(await signedGet(), 200)
    // 8 more bad signatures: 9 over two workers, each with a budget of 3: at least one budget is used up
    const badStatuses = new Set<number>()
    for (let i = 0; i < 8; i++) badStatuses.add(await badSignature())
    t.same([...badStatuses].sort(), [401, 429], 'bad signatures: 401 INVALID_SIGNATURE, then 429 once the budget is used up')
    const badLogin = async (): Promise<number> => (await send(gw.url, '/v1/auth/token', {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ username: 'alice', password: `not ${PASSWORD}` })
    })).status
    t.same([await badLogin(), await badLogin()], [401, 429], 'a wrong password, then a lockout')

    await t.test('the series, with the labels docs/observability.md documents', async (t) => {
      await eventually('the signed GETs counted', async () => await query(prometheus, 'sum(keygate_http_requests_total{route="/v1/clients/",status="200"})'),
        (r) => r[0]?.value[1] === '11')
      const documented = documentedLabels()
      t.ok(documented.size >= 12, `${documented.size} keygate series documented`)
      const names = new Set(await prometheus.api<string[]>('label/__name__/values'))
      const expected = ['keygate_http_requests_total', 'keygate_auth_outcomes_total', 'keygate_signature_verification_seconds',
        'keygate_upstream_latency_seconds', 'keygate_cache_lookups_total', 'keygate_store_errors_total', 'keygate_signature_budget_refusals_total',
        'keygate_signature_budget_exhausted_total', 'keygate_upstream_pending_requests', 'keygate_upstream_busy_total', 'keygate_worker_restarts_total']
      for (const [name, labels] of documented) {
        const histogram = names.has(`${name}_bucket`)
        const sample = histogram ? `${name}_bucket` : name
        if (!names.has(sample)) {
          t.notOk(expected.includes(name), `${name}: not scraped (none counted yet)`)
          continue
        }
        const series = await prometheus.api<Array<Record<string, string>>>('series', { 'match[]': sample })
        const want = ['__name__', 'instance', 'job', ...labels, ...histogram ? ['le'] : []].sort()
        t.same([...new Set(series.flatMap((s) => Object.keys(s)))].sort(), want, `${sample}: labels ${labels.join(', ') || 'none'}`)
      }
      t.same(expected.filter((name) => !names.has(name) && !names.has(`${name}_bucket`)), [],
        'the series a signed request, a refusal and a flood make are there')
      const reasons = (await query(prometheus, 'keygate_auth_outcomes_total{route="/v1/clients/"}')).map((s) => s.metric.reason).sort()
      t.same(reasons, ['INVALID_SIGNATURE', 'MISSING_TOKEN', 'RATE_LIMITED', 'ok'], 'each refusal under its code')
    })

    await t.test('exemplars: the latency buckets carry trace ids of the signed requests, the latest of either worker', async (t) => {
      const traced = new Set(gw.lines.filter((l) => l.msg === 'request' && l.url === '/v1/clients/' && l.status === 200).map((l) => l.trace_id))
      const now = Date.now() / 1000
      const stored = await eventually('exemplars stored', async () => await prometheus.api<Array<{ exemplars: Array<{ labels: Record<string, string> }> }>>(
        'query_exemplars', { query: 'keygate_upstream_latency_seconds_bucket{route="/v1/clients/"}', start: String(now - 600), end: String(now + 60) }),
      (r) => r.length > 0)
      const ids = stored.flatMap((series) => series.exemplars.map((e) => e.labels.trace_id))
      t.ok(ids.length > 0 && ids.every((id) => traced.has(id)), `${ids.length} exemplars, each a signed request's trace id`)
    })

    await t.test('the recording rules have values', async (t) => {
      const rate = await eventually('the request rate', async () =>
        await query(prometheus, 'job_route_status:keygate_http_requests:rate5m{route="/v1/clients/",status="200"}'), (r) => Number(r[0]?.value[1]) > 0)
      t.ok(Number(rate[0]?.value[1]) > 0, `requests per second: ${rate[0]?.value[1] ?? ''}`)
      const ratio = await eventually('the refusal ratio', async () =>
        await query(prometheus, 'job_reason:keygate_auth_refusals:ratio5m{reason="INVALID_SIGNATURE"}'), (r) => Number(r[0]?.value[1]) > 0)
      const share = Number(ratio[0]?.value[1])
      t.ok(share > 0 && share < 1, `INVALID_SIGNATURE's share of the authentication results: ${share}`)
      const p99 = await eventually('the upstream p99', async () =>
        await query(prometheus, 'job_route:keygate_upstream_latency_seconds:p99_5m{route="/v1/clients/"}'), (r) => Number(r[0]?.value[1]) > 0)
      t.ok(Number(p99[0]?.value[1]) > 0 && Number(p99[0]?.value[1]) <= 30, `upstream p99: ${p99[0]?.value[1] ?? ''} s`)
      const signature = await eventually('the signature p99', async () =>
        await query(prometheus, 'job:keygate_signature_verification_seconds:p99_5m'), (r) => Number(r[0]?.value[1]) > 0)
      t.ok(Number(signature[0]?.value[1]) > 0, `signature verification p99: ${signature[0]?.value[1] ?? ''} s`)
      const health = await prometheus.api<{ groups: Array<{ rules: Array<{ name: string; health: string; lastError?: string }> }> }>('rules')
      const unhealthy = health.groups.flatMap((group) => group.rules).filter((rule) => rule.health !== 'ok')
      t.same(unhealthy.map((rule) => `${rule.name}: ${rule.lastError ?? rule.health}`), [], 'every rule evaluates')
    })

    await t.test('every query of the Grafana dashboard is valid PromQL here', async (t) => {
      const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Array<{ title: string; targets?: Array<{ expr: string }> }> }
      const exprs = dashboard.panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr })))
      for (const { panel, expr } of exprs) {
        // Grafana's own variables, as Grafana fills them in
        const filled = expr.replaceAll('$__rate_interval', '1m').replaceAll('$__interval', '1m').replaceAll('$job', 'keygate')
        await t.resolves(query(prometheus, filled), `${panel}: ${expr}`)
      }
      const jobs = await prometheus.api<string[]>('label/job/values', { 'match[]': 'keygate_http_requests_total' })
      t.ok(jobs.includes('keygate'), 'the job variable finds keygate')
    })

    await t.test('alerts fire: a flood throttled, a login lockout, an IdP not answering, a worker restarting', async (t) => {
      const flood = await eventually('KeygateSignatureFlood', async () => await firing(prometheus),
        (a) => a.some((x) => x.labels.alertname === 'KeygateSignatureFlood'))
      const alert = flood.find((x) => x.labels.alertname === 'KeygateSignatureFlood')
      t.match(alert, { labels: { job: 'keygate', severity: 'warning' }, annotations: { runbook: 'docs/monitoring.md#keygatesignatureflood' } })

      // The lockout's series appeared with its first 429: it takes a second one for increase() to see
      // (docs/monitoring.md says so); scraped once, then one more
      await eventually('the lockout counted', async () =>
        await query(prometheus, 'keygate_auth_outcomes_total{route="/v1/auth/token",reason="RATE_LIMITED"}'), (r) => r.length > 0)
      t.equal(await badLogin(), 429, 'still locked out')
      await eventually('KeygateLoginLockouts', async () => await firing(prometheus),
        (a) => a.some((x) => x.labels.alertname === 'KeygateLoginLockouts'))

      // the identity provider that never answered: its fetches fail, and its keys are unusable (pending: the alert waits 2 minutes)
      const idpAlerts = await eventually('KeygateIdpKeyFetchFailing', async () => await prometheus.api<{ alerts: Alert[] }>('alerts'),
        (r) => r.alerts.some((x) => x.labels.alertname === 'KeygateIdpKeyFetchFailing' && x.state === 'firing'))
      t.match(idpAlerts.alerts.find((x) => x.labels.alertname === 'KeygateIdpKeyFetchFailing'),
        { labels: { issuer: 'down', severity: 'warning' }, annotations: { runbook: 'docs/monitoring.md#keygateidpkeyfetchfailing' } })
      t.match(idpAlerts.alerts.find((x) => x.labels.alertname === 'KeygateIdpKeysUnusable'),
        { state: 'pending', labels: { issuer: 'down', severity: 'critical' } }, 'KeygateIdpKeysUnusable: its condition holds')

      const [victim] = gw.workers as [number, number]
      process.kill(victim, 'SIGKILL')
      const restart = await eventually('KeygateWorkerRestarting', async () => await firing(prometheus),
        (a) => a.some((x) => x.labels.alertname === 'KeygateWorkerRestarting'))
      t.match(restart.find((x) => x.labels.alertname === 'KeygateWorkerRestarting'),
        { labels: { instance: `127.0.0.1:${metricsPort}`, severity: 'warning' }, annotations: { description: /replaced: \d+\.$/ } })
      t.same((await query(prometheus, 'keygate_worker_restarts_total')).map((s) => s.value[1]), ['1'], 'one restart counted')
      t.notOk((await firing(prometheus)).some((x) => x.labels.alertname === 'KeygateWorkerCrashLooping'), 'one restart is no crash loop')
      t.notOk((await firing(prometheus)).some((x) => x.labels.alertname === 'KeygateDown'), 'and keygate stayed up')
      const replacement = await gw.waitForLine((l) => l.msg === 'replacement worker listening', 'about the replacement')
      gw.workers = [...gw.workers.filter((pid) => pid !== victim), replacement.worker as number]
    })

    gw.child.kill('SIGTERM')
    t.equal((await gw.exited).code, 0, 'keygate stops cleanly')
    t.ok(await gone(gw.workers), 'its workers with it')
  })
