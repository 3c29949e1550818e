// `npm start`'s log lines: readable on a terminal (a pseudo-terminal made by script(1), as a
// person's), JSON through a pipe (as a log collector reads them), and LOG_FORMAT=json|pretty
// choosing either way. Each run starts the demo as package.json's start script does, makes one
// request, and reads the startup line and that request's line.
import t, { type Test } from 'tap'
import { send } from '../helpers/http.js'
import { interruptGroup, portAnswers, startCommand, startListening, type Listening } from '../helpers/listening.js'
import { TYPESCRIPT_NODE_ARGS } from '../helpers/typescript-node.js'

t.setTimeout(300_000)

const root = new URL('../..', import.meta.url).pathname
/** TERM as a terminal emulator sets it: colours are for a terminal that has them */
const TERMINAL = { TERM: 'xterm-256color' }
const ESC = '\u001b'
/** a terminal's colour codes */
const ANSI = new RegExp(`${ESC}\\[[0-9;]*m`, 'g')
const hasAnsi = (line: string): boolean => line.includes(`${ESC}[`)

/** npm start on a terminal: script(1) runs it on a pseudo-terminal of its own (-e: its exit code, -f: output at once). */
async function onTerminal (env: Record<string, string>): Promise<Listening> {
  const command = [process.execPath, ...TYPESCRIPT_NODE_ARGS, 'scripts/start.ts'].map((word) => `'${word}'`).join(' ')
  return await startCommand('script', ['-qefc', command, '/dev/null'], { ...TERMINAL, UPSTREAM_PORT: '0', ...env }, root, { detached: true })
}

/** npm start with its stdout a pipe */
async function throughPipe (env: Record<string, string>): Promise<Listening> {
  return await startCommand(process.execPath, [...TYPESCRIPT_NODE_ARGS, 'scripts/start.ts'], { ...TERMINAL, UPSTREAM_PORT: '0', ...env }, root,
    { detached: true })
}

/**
 * One request, its log line awaited; then Ctrl-C. The lines of stdout, without the terminal's
 * carriage returns. On the pseudo-terminal, Ctrl-C is typed (the byte 0x03, which the terminal turns
 * into SIGINT for the program in front): script(1) runs the program in a session of its own, out of
 * reach of a signal to script's process group, and the gateway outlives the terminal's hangup (SIGHUP
 * reloads its route file).
 */
async function linesOfARun (t: Test, started: Listening, { terminal }: { terminal: boolean }): Promise<string[]> {
  t.teardown(() => { try { process.kill(-(started.child.pid as number), 'SIGKILL') } catch {} })
  t.equal((await send(started.url, '/v1/time')).status, 200, 'GET /v1/time answered')
  for (let i = 0; i < 100 && !started.stdout().includes('/v1/time'); i++) await new Promise((resolve) => setTimeout(resolve, 50))
  if (terminal) {
    const exited = new Promise((resolve) => started.child.once('exit', resolve))
    started.child.stdin.write('\u0003')
    await exited
    t.notOk(await portAnswers(started.url), 'Ctrl-C stopped it: nothing listens any more')
  } else {
    await interruptGroup(started.child)
  }
  return started.stdout().replaceAll('\r', '').split('\n').filter((line) => line !== '')
}

const READABLE_STARTUP = /^\d\d:\d\d:\d\d\.\d{3} INFO {2}\(\d+\) keygate listens on http:\/\/127\.0\.0\.1:\d+ \(store embedded, 2 routes, 1 worker, metrics off, admin off\)/
const READABLE_REQUEST = /^\d\d:\d\d:\d\d\.\d{3} INFO {2}\(\d+\) request reqId=[0-9a-f-]{36} method=GET ip=127\.0\.0\.1 url=\/v1\/time status=200 ms=[0-9.]+$/

function readable (t: Test, lines: string[], colors: boolean): void {
  const plain = lines.map((line) => line.replace(ANSI, ''))
  t.ok(plain.some((line) => READABLE_STARTUP.test(line)), 'the startup line reads: time, level, process id, message')
  t.ok(plain.some((line) => READABLE_REQUEST.test(line)), 'the request\'s line reads: time, level, process id, message, then name=value')
  t.same(lines.filter((line) => line.startsWith('{')), [], 'no JSON line')
  t.equal(lines.some(hasAnsi), colors, colors ? 'in colour' : 'no colour codes')
}

function json (t: Test, lines: string[]): void {
  const parsed = lines.map((line) => { try { return JSON.parse(line) as Record<string, unknown> } catch { return line } })
  t.same(parsed.filter((line) => typeof line === 'string'), [], 'every line is JSON')
  const entries = parsed as Array<Record<string, unknown>>
  t.match(entries.find((entry) => String(entry.msg).startsWith('keygate listens on')), { level: 30, startup: { store: 'embedded', routes: 2 } },
    'the startup line, with its fields')
  t.match(entries.find((entry) => entry.msg === 'request'), { level: 30, method: 'GET', url: '/v1/time', status: 200 }, 'the request\'s line')
}

t.test('on a terminal: readable lines, in colour', async (t) => {
  readable(t, await linesOfARun(t, await onTerminal({}), { terminal: true }), true)
})

t.test('on a terminal with LOG_FORMAT=json: JSON', async (t) => {
  const lines = await linesOfARun(t, await onTerminal({ LOG_FORMAT: 'json' }), { terminal: true })
  // the terminal also shows the demo user's banner (stderr): only the log's lines are checked
  json(t, lines.filter((line) => line.startsWith('{')))
  t.ok(lines.filter((line) => line.startsWith('{')).length >= 3, 'the log lines are there')
  t.notOk(lines.some((line) => READABLE_STARTUP.test(line.replace(ANSI, ''))), 'and none readable')
})

t.test('through a pipe: JSON', async (t) => {
  json(t, await linesOfARun(t, await throughPipe({}), { terminal: false }))
})

t.test('through a pipe with LOG_FORMAT=pretty: readable lines, no colour codes', async (t) => {
  readable(t, await linesOfARun(t, await throughPipe({ LOG_FORMAT: 'pretty' }), { terminal: false }), false)
})

t.test('a LOG_FORMAT it does not know stops the start, naming the values it takes', async (t) => {
  const failed = await startListening('scripts/start.ts', [], { UPSTREAM_PORT: '0', LOG_FORMAT: 'text' }).then(() => undefined, (err: Error) => err)
  t.match(failed?.message, /LOG_FORMAT: "text" is not allowed: use one of json or pretty/)
})
