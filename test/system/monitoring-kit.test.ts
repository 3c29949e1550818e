// The monitoring kit of docs/monitoring/ checked as an operator loads it: the rules pass
// `promtool check rules` and their unit tests (`promtool test rules`, keygate.rules.test.yml), every
// alert is tested both ways and documented where its runbook annotation points, and the rules and
// the Grafana dashboard use only series keygate exports (its registries say which) or the
// recording rules. The dashboard's Worker restarts panel, whose series only processes with workers
// serve, evaluated by promtool for an instance of one process and one with workers. The rules
// evaluated by a real Prometheus: test/system/monitoring-prometheus.test.ts.
import { spawnSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { parse, stringify } from 'yaml'
import { docPage } from '../helpers/docs.js'
import { DASHBOARD, KIT, PROMETHEUS_SERIES, PROMTOOL, RULES, RULES_TEST, exportedMetricNames, findPrometheus, metricNames } from '../helpers/monitoring.js'

interface Rule { record?: string; alert?: string; expr: string; labels?: Record<string, string>; annotations?: Record<string, string> }
interface AlertTest { eval_time: string; alertname: string; exp_alerts: unknown[] }

const rules = (parse(readFileSync(RULES, 'utf8')) as { groups: Array<{ name: string; rules: Rule[] }> }).groups.flatMap((group) => group.rules)
const alerts = rules.filter((rule) => rule.alert !== undefined)
const recorded = new Set(rules.flatMap((rule) => rule.record ?? []))
const exported = await exportedMetricNames()
const found = findPrometheus()

t.test('metricNames finds the series of an expression, and nothing else', async (t) => {
  t.same(metricNames('sum by (job, le) (rate(a_bucket{route="x{y}",le!="1"}[5m])) / ignoring (reason) group_left b:c:rate5m > 0.25 and on (job) up == 0'),
    ['a_bucket', 'b:c:rate5m', 'up'])
  t.same(metricNames('round(histogram_quantile(0.99, x) * 1e6) > bool 2.5e-3 offset 5m'), ['x'])
  t.same(metricNames('sum(increase(k_total{job=~"$job"}[$__rate_interval]))'), ['k_total'])
  t.ok(exported.has('keygate_http_requests_total') && exported.has('keygate_upstream_latency_seconds_bucket') &&
    exported.has('keygate_worker_restarts_total') && exported.has('process_cpu_seconds_total'), 'the registries name keygate\'s series')
  t.notOk(exported.has('keygate_upstream_latency_seconds'), 'a histogram is served as its _bucket, _sum and _count')
})

t.test('promtool: the rules are valid, and their unit tests pass', { skip: 'reason' in found ? found.reason : false }, async (t) => {
  const check = spawnSync(PROMTOOL, ['check', 'rules', RULES], { encoding: 'utf8' })
  t.equal(check.status, 0, `promtool check rules: ${check.stdout}${check.stderr}`)
  t.match(check.stdout, `SUCCESS: ${rules.length} rules found`)
  // rule_files in the test file are relative to it
  const unit = spawnSync(PROMTOOL, ['test', 'rules', RULES_TEST], { encoding: 'utf8', cwd: KIT })
  t.equal(unit.status, 0, `promtool test rules: ${unit.stdout}${unit.stderr}`)
  t.match(unit.stdout, /SUCCESS/)
})

t.test('each alert is tested firing and not firing', async (t) => {
  const tests = (parse(readFileSync(RULES_TEST, 'utf8')) as { tests: Array<{ alert_rule_test?: AlertTest[] }> }).tests
    .flatMap((test) => test.alert_rule_test ?? [])
  t.ok(alerts.length >= 10, `${alerts.length} alerts`)
  for (const { alert } of alerts) {
    const mine = tests.filter((test) => test.alertname === alert)
    t.ok(mine.some((test) => test.exp_alerts.length > 0), `${alert ?? ''} is tested firing`)
    t.ok(mine.some((test) => test.exp_alerts.length === 0), `${alert ?? ''} is tested not firing`)
  }
})

t.test('each alert has a severity, a summary, a description and a runbook section of docs/monitoring.md', async (t) => {
  const page = docPage('docs/monitoring.md')
  const anchors = new Set([...page.matchAll(/^#{2,4} (.+)$/gm)].map((m) => (m[1] as string).trim().toLowerCase().replace(/[^\w\- ]/g, '').replace(/ /g, '-')))
  for (const rule of alerts) {
    const name = rule.alert ?? ''
    t.match(rule.labels?.severity, /^(critical|warning)$/, `${name}: severity`)
    t.ok((rule.annotations?.summary ?? '') !== '' && (rule.annotations?.description ?? '') !== '', `${name}: summary and description`)
    t.equal(rule.annotations?.runbook, `docs/monitoring.md#${name.toLowerCase()}`, `${name}: its runbook is its section`)
    t.ok(anchors.has(name.toLowerCase()), `${name}: docs/monitoring.md has its section`)
  }
})

t.test('the rules use only series keygate exports', async (t) => {
  for (const rule of rules) {
    const unknown = metricNames(rule.expr).filter((name) => !exported.has(name) && !recorded.has(name) && !PROMETHEUS_SERIES.includes(name))
    t.same(unknown, [], `${rule.record ?? rule.alert ?? ''}: ${rule.expr}`)
  }
})

interface Panel {
  type: string
  title: string
  id: number
  gridPos: Record<string, number>
  targets?: Array<{ refId: string; expr: string }>
}

t.test('the Grafana dashboard: a dashboard of panels with PromQL targets, on series keygate exports', async (t) => {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    title: string; uid: string; schemaVersion: number; panels: Panel[]; templating: { list: Array<{ name: string; type: string; query: unknown }> }
  }
  t.type(dashboard.title, 'string')
  t.match(dashboard.uid, /^[\w-]{1,40}$/, 'a uid Grafana accepts')
  t.type(dashboard.schemaVersion, 'number')
  const variables = dashboard.templating.list.map((v) => v.name)
  t.same(variables, ['datasource', 'job'], 'its variables: the Prometheus data source and the job')
  const panels = dashboard.panels.filter((panel) => panel.type !== 'row')
  t.ok(panels.length >= 10, `${panels.length} panels`)
  t.equal(new Set(dashboard.panels.map((p) => p.id)).size, dashboard.panels.length, 'panel ids are unique')
  for (const panel of dashboard.panels) {
    const { x, y, w, h } = panel.gridPos
    t.ok([x, y, w, h].every(Number.isInteger) && (x ?? 0) + (w ?? 0) <= 24 && (h ?? 0) > 0, `${panel.title}: on Grafana's 24-column grid`)
  }
  const jobQuery = dashboard.templating.list.find((v) => v.name === 'job')?.query as { query: string }
  t.same(metricNames(jobQuery.query.replace(/^label_values\((.*), *\w+\)$/, '$1')).filter((name) => !exported.has(name)), [], 'the job variable\'s query')
  const names = new Set<string>()
  for (const panel of panels) {
    t.ok((panel.targets ?? []).length > 0, `${panel.title}: has targets`)
    t.equal(new Set(panel.targets?.map((target) => target.refId)).size, panel.targets?.length, `${panel.title}: refIds unique`)
    for (const target of panel.targets ?? []) {
      const used = metricNames(target.expr)
      t.ok(used.length > 0, `${panel.title}: ${target.expr} names a series`)
      const unknown = used.filter((name) => !exported.has(name) && !recorded.has(name) && !PROMETHEUS_SERIES.includes(name))
      t.same(unknown, [], `${panel.title}: ${target.expr}`)
      for (const name of used) names.add(name)
    }
  }
  // what the issue asks the dashboard to show
  for (const series of ['keygate_http_requests_total', 'keygate_auth_outcomes_total', 'keygate_upstream_latency_seconds_bucket', 'keygate_upstream_busy_total',
    'keygate_store_errors_total', 'keygate_rate_limited_total', 'keygate_signature_budget_exhausted_total', 'keygate_worker_restarts_total']) {
    t.ok(names.has(series), `the dashboard shows ${series}`)
  }
})

t.test('the Worker restarts panel: 0 for an instance of one process, which has no such series; the restarts where workers run',
  { skip: 'reason' in found ? found.reason : false }, async (t) => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: Panel[] }
    const [target, ...more] = dashboard.panels.find((panel) => panel.title === 'Worker restarts')?.targets ?? []
    t.equal(more.length, 0, 'one query')
    t.match(target?.expr, 'keygate_worker_restarts_total')
    // as Grafana fills its variables: the job, and the interval of one point
    const expr = (target?.expr ?? '').replaceAll('$job', 'keygate').replaceAll('$__interval', '5m')
    const single = 'single:9464'
    const workers = 'workers:9464'
    // above 0 or not, for each instance: increase() extrapolates, so one restart need not read 1
    const restarted = (values: Record<string, number>): unknown =>
      Object.entries(values).map(([instance, value]) => ({ labels: `{instance="${instance}"}`, value }))
    const tests = {
      evaluation_interval: '1m',
      tests: [{
        interval: '1m',
        input_series: [
          { series: `up{job="keygate",instance="${single}"}`, values: '1x19' },
          { series: `up{job="keygate",instance="${workers}"}`, values: '1x19' },
          // a worker replaced at minute 10
          { series: `keygate_worker_restarts_total{job="keygate",instance="${workers}"}`, values: '0x9 1x10' }
        ],
        promql_expr_test: [
          { expr: `(${expr}) > bool 0`, eval_time: '8m', exp_samples: restarted({ [single]: 0, [workers]: 0 }) },
          { expr: `(${expr}) > bool 0`, eval_time: '12m', exp_samples: restarted({ [single]: 0, [workers]: 1 }) }
        ]
      }]
    }
    const dir = mkdtempSync(join(tmpdir(), 'keygate-panel-'))
    t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
    writeFileSync(join(dir, 'panel.test.yml'), stringify(tests))
    const unit = spawnSync(PROMTOOL, ['test', 'rules', 'panel.test.yml'], { encoding: 'utf8', cwd: dir })
    t.equal(unit.status, 0, `promtool test rules: ${unit.stdout}${unit.stderr}`)
  })
