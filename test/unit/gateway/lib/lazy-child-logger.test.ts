// The request logger made on first use writes the same lines as the child Fastify would make:
// its bindings, its level, the root's redaction; and below the level it makes no child at all.
import { Writable } from 'node:stream'
import { pino } from 'pino'
import t from 'tap'
import { LazyChildLogger } from '../../../../gateway/src/lib/lazy-child-logger.js'

function capture (level: string): { root: pino.Logger, lines: Array<Record<string, unknown>> } {
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({ write (chunk, _enc, done) { lines.push(JSON.parse(String(chunk))); done() } })
  const root = pino({ level, redact: { paths: ['req.headers.authorization'], censor: '[redacted]' } }, stream)
  return { root, lines }
}

t.test('below the level: nothing written, no child made', async (t) => {
  const { root, lines } = capture('warn')
  let children = 0
  const child = (bindings: pino.Bindings): pino.Logger => { children++; return root.child(bindings) }
  const counting = Object.assign(Object.create(root) as object, { child }) as unknown as pino.Logger
  const log = new LazyChildLogger(counting, { reqId: 'r-1' }, {})
  t.equal(log.isLevelEnabled('info'), false, 'info is below the level')
  t.equal(log.isLevelEnabled('warn'), true, 'warn is not')
  log.info({ x: 1 }, 'not written')
  log.debug('not written')
  t.equal(children, 0, 'no child logger was made')
  log.warn({ x: 2 }, 'written')
  log.error('again')
  t.equal(children, 1, 'one child, made on the first line written')
  t.equal(log.isLevelEnabled('info'), false, 'the child made answers the same')
  t.equal(log.isLevelEnabled('error'), true)
  t.match(lines, [{ level: 40, reqId: 'r-1', x: 2, msg: 'written' }, { level: 50, reqId: 'r-1', msg: 'again' }])
  t.equal(lines.length, 2)
})

t.test('its lines are redacted as the root redacts, and carry the bindings', async (t) => {
  const { root, lines } = capture('info')
  const log = new LazyChildLogger(root, { reqId: 'r-2' }, {})
  log.info({ req: { headers: { authorization: 'Bearer secret' } } }, 'incoming')
  t.equal(lines.length, 1)
  t.equal(JSON.stringify(lines[0]).includes('secret'), false, 'the token is not in the line')
  t.match(lines[0], { reqId: 'r-2', req: { headers: { authorization: '[redacted]' } } })
})

t.test('a level of its own (a route\'s logLevel) counts', async (t) => {
  const { root, lines } = capture('warn')
  const log = new LazyChildLogger(root, { reqId: 'r-3' }, { level: 'debug' })
  t.equal(log.level, 'debug')
  t.equal(log.isLevelEnabled('debug'), true, 'the route\'s level decides, not the root\'s')
  t.equal(log.isLevelEnabled('trace'), false)
  log.debug('written at the route\'s level')
  t.match(lines, [{ level: 20, reqId: 'r-3' }])
})
