// The readable form of a log line (LOG_FORMAT=pretty, or a terminal), and which form a process
// writes. test/system/log-format.test.ts runs npm start on a terminal and through a pipe.
import t from 'tap'
import { logDestination, prettyLine, resolveLogFormat } from '../../../../gateway/src/lib/log-format.js'

const time = new Date(2026, 10, 25, 9, 5, 7, 42).getTime() // local time: 09:05:07.042

t.test('a line: local time, level, process id, message, then the fields as name=value', async (t) => {
  const line = JSON.stringify({
    level: 30, time, pid: 7, hostname: 'h', reqId: 'r-1', method: 'GET', url: '/v1/clients/?q=a b', status: 200, ms: 1.5, msg: 'request'
  })
  t.equal(prettyLine(`${line}\n`), '09:05:07.042 INFO  (7) request reqId=r-1 method=GET url="/v1/clients/?q=a b" status=200 ms=1.5\n',
    'the hostname left out; a value with a space quoted')
  t.equal(prettyLine(JSON.stringify({ level: 40, time, msg: 'careful' })), '09:05:07.042 WARN  careful\n')
})

t.test('nested fields are named with dots, lists shown as JSON, undefined left out', async (t) => {
  const line = JSON.stringify({ level: 30, time, startup: { url: 'http://127.0.0.1:8080', routes: 2 }, workers: [11, 12], msg: 'keygate listens' })
  t.equal(prettyLine(line), '09:05:07.042 INFO  keygate listens startup.url=http://127.0.0.1:8080 startup.routes=2 workers=[11,12]\n')
})

t.test('an error: its stack on the lines below, indented; its other members as fields', async (t) => {
  const err = { type: 'Error', message: 'boom', stack: 'Error: boom\n    at f (a.js:1:1)', code: 'E_X' }
  t.equal(prettyLine(JSON.stringify({ level: 50, time, err, msg: 'unhandled error' })),
    '09:05:07.042 ERROR unhandled error err.code=E_X\n    Error: boom\n        at f (a.js:1:1)\n')
})

t.test('in colour: the level coloured, the time and fields dimmed', async (t) => {
  t.equal(prettyLine(JSON.stringify({ level: 50, time, a: 1, msg: 'm' }), true),
    '\u001b[2m09:05:07.042\u001b[0m \u001b[31mERROR\u001b[0m m \u001b[2ma=1\u001b[0m\n')
})

t.test('what is not a JSON object passes through as it is', async (t) => {
  t.equal(prettyLine('not json'), 'not json\n')
  t.equal(prettyLine('[1,2]\n'), '[1,2]\n')
})

t.test('the format: LOG_FORMAT when set, else pretty on a terminal and JSON elsewhere; JSON keeps pino\'s own destination', async (t) => {
  const terminal = { isTTY: true, hasColors: () => true, write: () => true }
  const pipe = { write: () => true }
  t.equal(resolveLogFormat(undefined, terminal), 'pretty')
  t.equal(resolveLogFormat(undefined, pipe), 'json')
  t.equal(resolveLogFormat('json', terminal), 'json')
  t.equal(resolveLogFormat('pretty', pipe), 'pretty')
  t.equal(logDestination('json', terminal), undefined, 'JSON: no stream of keygate\'s in the way')
  t.equal(logDestination(undefined, pipe), undefined)
  const written: string[] = []
  logDestination('pretty', { write: (text: string) => written.push(text) })?.write(`${JSON.stringify({ level: 30, time, msg: 'hi' })}\n`)
  t.same(written, ['09:05:07.042 INFO  hi\n'], 'pretty to a pipe: no colour codes')
})
