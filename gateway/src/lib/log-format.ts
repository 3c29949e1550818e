// How the gateway's log lines look on stdout: JSON, pino's own lines (what a log collector reads),
// or readable lines for a person at a terminal. LOG_FORMAT chooses; unset, a terminal gets
// readable lines, and a pipe, a file or a container's log gets JSON.
import type { DestinationStream } from 'pino'

export const LOG_FORMATS = ['json', 'pretty'] as const
export type LogFormat = typeof LOG_FORMATS[number]

interface Output { write: (text: string) => unknown; isTTY?: boolean; hasColors?: () => boolean }

/** LOG_FORMAT when set; else pretty on a terminal, JSON anywhere else. */
export function resolveLogFormat (format: LogFormat | undefined, out: Output = process.stdout): LogFormat {
  return format ?? (out.isTTY === true ? 'pretty' : 'json')
}

/**
 * Where pino writes the lines. JSON: undefined, pino's own destination (the lines, and the cost of
 * writing them, as they always were). Pretty: each line made readable and written to `out`, in
 * colour on a terminal that has them (not with NO_COLOR).
 */
export function logDestination (format: LogFormat | undefined, out: Output = process.stdout): DestinationStream | undefined {
  if (resolveLogFormat(format, out) === 'json') return undefined
  const colors = out.isTTY === true && out.hasColors?.() === true
  return { write: (line: string) => { out.write(prettyLine(line, colors)) } }
}

const LEVELS: Record<number, { label: string; color: number }> = {
  10: { label: 'TRACE', color: 90 },
  20: { label: 'DEBUG', color: 36 },
  30: { label: 'INFO', color: 32 },
  40: { label: 'WARN', color: 33 },
  50: { label: 'ERROR', color: 31 },
  60: { label: 'FATAL', color: 35 }
}
/** on every line, or in its head: not repeated among the fields */
const HEAD_FIELDS = new Set(['level', 'time', 'pid', 'msg', 'hostname'])
const DIM = 2

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value)

/** A value as it reads after `name=`: a plain word as it is, anything else as JSON. */
function shown (value: unknown): string {
  if (typeof value === 'string') return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value)
  return JSON.stringify(value) ?? String(value)
}

/** `name=value` for each field, a nested object's members named with dots (`startup.url=...`). */
function fieldsOf (record: Record<string, unknown>, prefix: string, out: string[]): string[] {
  for (const [name, value] of Object.entries(record)) {
    if (value === undefined) continue
    if (isRecord(value)) fieldsOf(value, `${prefix}${name}.`, out)
    else out.push(`${prefix}${name}=${shown(value)}`)
  }
  return out
}

/**
 * One pino JSON line as a person reads it: the local time, the level, the process id (which
 * worker), the message and the fields as name=value; an error's stack on the lines below.
 * Anything that is not a JSON object is passed through as it is.
 */
export function prettyLine (line: string, colors = false): string {
  let entry: unknown
  try {
    entry = JSON.parse(line)
  } catch {
    entry = undefined
  }
  if (!isRecord(entry)) return line.endsWith('\n') ? line : `${line}\n`
  const paint = (code: number, text: string): string => colors && text !== '' ? `\x1b[${code}m${text}\x1b[0m` : text
  const level = LEVELS[entry.level as number] ?? { label: String(entry.level), color: 0 }
  const time = typeof entry.time === 'number' ? clock(new Date(entry.time)) : ''
  const rest: Record<string, unknown> = {}
  let stack: string | undefined
  for (const [name, value] of Object.entries(entry)) {
    if (HEAD_FIELDS.has(name)) continue
    if (name === 'err' && isRecord(value) && typeof value.stack === 'string') {
      // the stack's first line is the type and the message
      stack = value.stack
      const more = Object.entries(value).filter(([key]) => !['type', 'message', 'stack'].includes(key))
      if (more.length > 0) rest.err = Object.fromEntries(more)
      continue
    }
    rest[name] = value
  }
  const fields = fieldsOf(rest, '', [])
  const pid = typeof entry.pid === 'number' ? paint(DIM, `(${entry.pid})`) : ''
  const head = [paint(DIM, time), paint(level.color, level.label.padEnd(5)), pid, typeof entry.msg === 'string' ? entry.msg : '']
    .filter((part) => part !== '').join(' ')
  const below = stack === undefined ? '' : `\n${stack.split('\n').map((text) => `    ${text}`).join('\n')}`
  return `${head}${fields.length === 0 ? '' : ` ${paint(DIM, fields.join(' '))}`}${below}\n`
}

/** HH:MM:SS.mmm, local time */
function clock (date: Date): string {
  const two = (n: number): string => String(n).padStart(2, '0')
  return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}.${String(date.getMilliseconds()).padStart(3, '0')}`
}
