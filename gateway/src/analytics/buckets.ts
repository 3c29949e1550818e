// The shape of usage analytics in the store: counts of requests in time buckets, one hash per
// bucket, one field per (key, user, route, status class, error code, signed agent, MCP method and tool). Two resolutions: a minute
// for the recent hours, an hour for the recent days. Every flush adds to both, so a window is
// read from one resolution alone.

export type Resolution = 'minute' | 'hour'

export interface ResolutionSpec {
  /** the bucket's length */
  ms: number
  /** how long a bucket is kept after it ends (the store expires it then) */
  retentionMs: number
  /** the letter in the bucket's name */
  tag: string
}

const MINUTE_MS = 60_000
const HOUR_MS = 3_600_000

export const RESOLUTIONS: Record<Resolution, ResolutionSpec> = {
  minute: { ms: MINUTE_MS, retentionMs: 6 * HOUR_MS, tag: 'm' },
  hour: { ms: HOUR_MS, retentionMs: 14 * 24 * HOUR_MS, tag: 'h' }
}

/** the longest window that can be read: the hourly buckets' retention */
export const MAX_WINDOW_MS = RESOLUTIONS.hour.retentionMs

/** the bucket of `resolution` that holds `atMs`, by its start (ms since the epoch) */
export function bucketStart (resolution: Resolution, atMs: number): number {
  const { ms } = RESOLUTIONS[resolution]
  return atMs - (atMs % ms)
}

/** the bucket's name under the store's usage prefix: `m:<start in minutes>`, `h:<start in hours>` */
export function bucketName (resolution: Resolution, startMs: number): string {
  const { ms, tag } = RESOLUTIONS[resolution]
  return `${tag}:${Math.floor(startMs / ms)}`
}

/** seconds the store keeps the bucket that starts at `startMs`, counted from `nowMs` (at least 1) */
export function bucketTtlSeconds (resolution: Resolution, startMs: number, nowMs: number): number {
  const { ms, retentionMs } = RESOLUTIONS[resolution]
  return Math.max(1, Math.ceil((startMs + ms + retentionMs - nowMs) / 1000))
}

/** the resolution a window is read at: minutes while they are kept, hours beyond */
export function resolutionFor (windowMs: number): Resolution {
  return windowMs <= RESOLUTIONS.minute.retentionMs ? 'minute' : 'hour'
}

/** the starts of the buckets that cover the last `windowMs` up to `nowMs`, oldest first */
export function bucketStarts (resolution: Resolution, windowMs: number, nowMs: number): number[] {
  const { ms } = RESOLUTIONS[resolution]
  const last = bucketStart(resolution, nowMs)
  const count = Math.max(1, Math.ceil(windowMs / ms))
  const starts: number[] = []
  for (let i = count - 1; i >= 0; i--) starts.push(last - i * ms)
  return starts
}

/** what no request had: no key (bearer, public route, refused before a key was found), no user, no signed agent */
export const NONE = '-'
/** the dimensions of the requests past the in-process bound (counter.ts) */
export const OTHER = 'other'
/** between the dimensions of a field; never in an apiKey, a username, an origin or a status class, taken out of route names */
const SEP = '\u001f'

export interface UsageDimensions {
  key: string
  user: string
  route: string
  /** 2xx, 3xx, 4xx, 5xx */
  status: string
  /** keygate's error code when it refused the request, else NONE */
  code: string
  /** the signed agent's directory origin (Web Bot Auth), else NONE */
  agent: string
  /** on an MCP route, the JSON-RPC method and the tool (bounded labels: mcp-calls/labels.ts), else NONE */
  method: string
  tool: string
}

/** SEP cannot be in a route's name or a tool's label: it is taken out */
const clean = (text: string): string => text.includes(SEP) ? text.replaceAll(SEP, ' ') : text

/**
 * The field of one series; a request without an agent keeps the five-part field counted before
 * agents were (one series, not two), and one without an MCP method the six-part field (an MCP
 * route's request: eight parts, its method and tool last).
 */
export function encodeField (key: string, user: string, route: string, status: string, code: string, agent: string = NONE,
  method: string = NONE, tool: string = NONE): string {
  const field = key + SEP + user + SEP + clean(route) + SEP + status + SEP + code
  if (method !== NONE) return field + SEP + agent + SEP + method + SEP + clean(tool)
  return agent === NONE ? field : field + SEP + agent
}

export function decodeField (field: string): UsageDimensions | undefined {
  const parts = field.split(SEP)
  if (parts.length !== 5 && parts.length !== 6 && parts.length !== 8) return undefined
  const [key, user, route, status, code, agent = NONE, method = NONE, tool = NONE] =
    parts as [string, string, string, string, string, string?, string?, string?]
  return { key, user, route, status, code, agent, method, tool }
}

/** 200 -> '2xx'; a table, not a string built per request */
const STATUS_CLASSES = ['1xx', '2xx', '3xx', '4xx', '5xx']
export function statusClass (status: number): string {
  return STATUS_CLASSES[Math.floor(status / 100) - 1] ?? '5xx'
}
