// The monitoring kit (docs/monitoring/) as tests read it: the metric names keygate exports, taken
// from its registries (never from a copy), the metric names a PromQL expression uses, and a real
// Prometheus (Debian's `prometheus` package, which brings promtool too), installed once with
// apt-get when missing and the tests run as root. Each Prometheus runs on a free port of
// 127.0.0.1 with its config and its data in a temp dir, both removed when the test ends.
import { spawn } from 'node:child_process'
import { existsSync } from 'node:fs'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createClusterMetrics, createGatewayMetrics } from '../../gateway/src/metrics/metrics.js'
import { installedWithApt, type Found } from './apt.js'
import { send } from './http.js'
import { freePort } from './redis.js'

export const KIT = fileURLToPath(new URL('../../docs/monitoring/', import.meta.url))
export const RULES = join(KIT, 'keygate.rules.yml')
export const RULES_TEST = join(KIT, 'keygate.rules.test.yml')
export const DASHBOARD = join(KIT, 'grafana-dashboard.json')
export const PROMETHEUS = '/usr/bin/prometheus'
export const PROMTOOL = '/usr/bin/promtool'

/** series Prometheus makes itself for every target, which the kit may use beside keygate's */
export const PROMETHEUS_SERIES = ['up']

/**
 * Every sample name keygate's metrics listener can serve: the gateway's registry with every
 * optional source and the process metrics, and the cluster primary's own; a histogram's as its
 * _bucket, _sum and _count.
 */
export async function exportedMetricNames (): Promise<Set<string>> {
  const stats = { hits: 0, misses: 0 }
  const gateway = createGatewayMetrics({
    keys: { stats },
    tokens: { stats },
    store: { errors: 0 },
    signatureBudget: { stats: { refusals: 0, exhausted: 0, keysAttacked: 0 } },
    userScopes: { stats }
  })
  gateway.includeProcessMetrics()
  const families = [...await gateway.registry.getMetricsAsJSON(), ...await createClusterMetrics({ restarts: 0 }).getMetricsAsJSON()]
  const names = new Set<string>()
  for (const family of families) {
    const type = String(family.type)
    const suffixes = type === 'histogram' ? ['_bucket', '_sum', '_count'] : type === 'summary' ? ['', '_sum', '_count'] : ['']
    for (const suffix of suffixes) names.add(`${family.name}${suffix}`)
  }
  return names
}

/** what a PromQL expression may hold besides metric names */
const KEYWORDS = new Set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'and', 'or', 'unless', 'bool', 'offset', 'inf', 'nan'])

/**
 * The metric names in a PromQL expression (a Grafana one too: its $variables are left out):
 * the identifiers left once strings, label matchers, ranges, label lists, numbers, durations and
 * function calls are set aside.
 */
export function metricNames (expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'/g, '""')
    .replace(/\{[^}]*\}/g, ' ')
    .replace(/\[[^\]]*\]/g, ' ')
    .replace(/\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' ')
    .replace(/\$\{?\w+\}?/g, ' ')
    .replace(/(?<![\w:])\d[\d.]*(?:e[+-]?\d+)?(?:ms|[smhdwy])?(?![\w:])/gi, ' ')
  return [...bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\()?/g)]
    .filter((m) => m[2] === undefined && !KEYWORDS.has((m[1] as string).toLowerCase()))
    .map((m) => m[1] as string)
}

let found: Found | undefined

/**
 * Prometheus's path (promtool is beside it), installing the package once per test process when
 * missing; else why there is none, for the tests to skip with.
 */
export function findPrometheus (): Found {
  const both = (): string | undefined => existsSync(PROMETHEUS) && existsSync(PROMTOOL) ? PROMETHEUS : undefined
  found ??= installedWithApt('prometheus and promtool', both, ['prometheus'], undefined, ['prometheus.service', 'prometheus-node-exporter.service'])
  return found
}

interface Teardown { teardown: (fn: () => unknown) => void }

export interface RunningPrometheus {
  /** http://127.0.0.1:PORT */
  url: string
  /** its log so far */
  output: () => string
  /** the data of a successful answer of the HTTP API (GET /api/v1/...), or throws with its error */
  api: <T>(path: string, query?: Record<string, string>) => Promise<T>
}

/** Prometheus running `config` (prometheus.yml text); resolved once it is ready. */
export async function runPrometheus (t: Teardown, path: string, config: string, flags: string[] = []): Promise<RunningPrometheus> {
  const dir = await mkdtemp(join(tmpdir(), 'keygate-prometheus-'))
  let stop = async (): Promise<void> => {}
  t.teardown(async () => {
    await stop()
    await rm(dir, { recursive: true, force: true })
  })
  const port = await freePort()
  const file = join(dir, 'prometheus.yml')
  await writeFile(file, config)
  const child = spawn(path, [
    `--config.file=${file}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn', ...flags
  ], { cwd: dir, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'pipe'] })
  let output = ''
  child.stdout.on('data', (chunk: Buffer) => { output += chunk.toString() })
  child.stderr.on('data', (chunk: Buffer) => { output += chunk.toString() })
  const exited = new Promise<void>((resolve) => child.once('exit', () => { resolve() }))
  stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM')
      await exited
    }
  }
  const url = `http://127.0.0.1:${port}`
  const ready = async (): Promise<boolean> => (await send(url, '/-/ready').catch(() => undefined))?.status === 200
  for (let attempt = 0; attempt < 100 && !await ready(); attempt++) {
    if (child.exitCode !== null) throw new Error(`prometheus exited with ${child.exitCode}: ${output}`)
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  if (!await ready()) throw new Error(`prometheus is not ready on ${url} after 10 s: ${output}`)
  const api = async <T>(apiPath: string, query: Record<string, string> = {}): Promise<T> => {
    const res = await send(url, `/api/v1/${apiPath}?${new URLSearchParams(query).toString()}`)
    const body = res.json<{ status: string; data: T; error?: string }>()
    if (body.status !== 'success') throw new Error(`prometheus /api/v1/${apiPath}: ${body.error ?? res.text}`)
    return body.data
  }
  return { url, output: () => output, api }
}
