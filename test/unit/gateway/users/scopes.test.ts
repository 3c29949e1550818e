// The one rule of what a scope is, and the set operations the scope stage relies on.
import t from 'tap'
import { intersectScopes, isScope, MAX_SCOPES, missingScopes, normaliseScopes, scopeProblem, scopeSet } from '../../../../gateway/src/users/scopes.js'
import { captureGatewayError } from '../../../helpers/auth-fixtures.js'

t.test('isScope: 1-64 letters, digits, ":", ".", "_", "-", "/"', async (t) => {
  const good = ['clients:read', 'a', 'A9', 'billing/invoices.write', 'x_y-z', 'urn:keygate:admin', 'x'.repeat(64)]
  for (const scope of good) t.ok(isScope(scope), scope)
  const bad: Array<[string, unknown]> = [
    ['empty', ''],
    ['a space (the upstream header is space-separated)', 'clients read'],
    ['a tab', 'clients\tread'],
    ['65 characters', 'x'.repeat(65)],
    ['a comma (the CLI splits on it)', 'a,b'],
    ['a quote (WWW-Authenticate carries scopes quoted)', 'a"b'],
    ['a backslash', 'a\\b'],
    ['non-ASCII', 'clïents:read'],
    ['a star', 'clients:*'],
    ['not a string', 42],
    ['null', null]
  ]
  for (const [label, value] of bad) t.notOk(isScope(value), label)
})

t.test('normaliseScopes: sorted, each once; VALIDATION_FAILED naming the bad ones and the rule', async (t) => {
  t.same(normaliseScopes(['b', 'a', 'b']), ['a', 'b'])
  t.same(normaliseScopes([]), [])
  const err = await captureGatewayError(() => normaliseScopes(['ok', 'not ok', '']))
  t.equal(err.code, 'VALIDATION_FAILED')
  t.equal(err.statusCode, 400)
  t.equal(err.message, 'scopes: "not ok", "" are not scopes: 1-64 letters, digits, ":", ".", "_", "-" or "/" (no spaces)')
  t.same(err.extra, { errors: [{ field: 'scopes', message: '"not ok", "" are not scopes: 1-64 letters, digits, ":", ".", "_", "-" or "/" (no spaces)' }] })
  t.equal((await captureGatewayError(() => normaliseScopes('a', 'grant'))).message, 'grant: must be a list of scopes', 'the field named')
  const many = Array.from({ length: MAX_SCOPES + 1 }, (_, i) => `s${i}`)
  t.equal(scopeProblem(many), `at most ${MAX_SCOPES} scopes, not ${MAX_SCOPES + 1}`)
  t.equal(scopeProblem(many.slice(1)), undefined, `${MAX_SCOPES} is fine`)
})

t.test('missingScopes and intersectScopes', async (t) => {
  t.same(missingScopes(['a', 'b', 'c'], new Set(['b'])), ['a', 'c'], 'in the order asked')
  t.same(missingScopes([], new Set()), [])
  const key = scopeSet(['a', 'b'])
  t.equal(intersectScopes(key, scopeSet(['a', 'b', 'c'])), key, 'all held: the same set, nothing made')
  const narrowed = intersectScopes(key, scopeSet(['b', 'c']))
  t.same(narrowed.list, ['b'])
  t.equal(narrowed.text, 'b')
  t.same(intersectScopes(key, scopeSet([])).list, [])
  t.equal(scopeSet(['a', 'b']).text, 'a b', 'space-separated, as OAuth\'s scope')
})
