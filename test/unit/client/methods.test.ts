// The protocol core's body rules by method: one text for a bodyless method's body, whoever refuses
// it (the request-target plugin on every path, the proxy's signed-route check, the client).
import t from 'tap'
import {
  BODY_OPTIONAL_METHODS, BODYLESS_METHODS, bodylessMethodProblem, HTTP_METHODS, NO_BODY_METHODS, signedBodyMethodProblem
} from '../../../client/src/protocol/index.js'

t.test('NO_BODY_METHODS: the bodyless methods and the ones a route may take a body on', async (t) => {
  t.same([...NO_BODY_METHODS].sort(), [...BODYLESS_METHODS, ...BODY_OPTIONAL_METHODS].sort())
  t.same([...NO_BODY_METHODS].sort(), ['DELETE', 'GET', 'HEAD', 'OPTIONS', 'TRACE'])
})

t.test('each method, without and with bodyOnMethods', async (t) => {
  const cases: Array<[string, string | undefined, RegExp | undefined, RegExp | undefined]> = [
    // method, bodylessMethodProblem, signed (no bodyOnMethods), signed (bodyOnMethods: DELETE, OPTIONS)
    ['GET', 'A GET request carries no body', /^A GET request carries no body$/, /^A GET request carries no body$/],
    ['HEAD', 'A HEAD request carries no body', /^A HEAD request carries no body$/, /^A HEAD request carries no body$/],
    ['TRACE', 'A TRACE request carries no body', /^A TRACE request carries no body$/, /^A TRACE request carries no body$/],
    ['DELETE', undefined, /^A signed DELETE request carries no body here: .*bodyOnMethods: \[DELETE\]$/, undefined],
    ['OPTIONS', undefined, /^A signed OPTIONS request carries no body here: .*bodyOnMethods: \[OPTIONS\]$/, undefined],
    ['POST', undefined, undefined, undefined],
    ['PUT', undefined, undefined, undefined],
    ['PATCH', undefined, undefined, undefined]
  ]
  t.same(cases.map(([m]) => m).filter((m) => m !== 'TRACE').sort(), [...HTTP_METHODS].sort(), 'every method a route may allow')
  for (const [method, bodyless, signed, signedWithBody] of cases) {
    t.equal(bodylessMethodProblem(method), bodyless, `${method}: anywhere`)
    const plain = signedBodyMethodProblem(method)
    const taking = signedBodyMethodProblem(method, BODY_OPTIONAL_METHODS)
    if (signed === undefined) t.equal(plain, undefined, `${method}: signed`)
    else t.match(plain, signed, `${method}: signed`)
    if (signedWithBody === undefined) t.equal(taking, undefined, `${method}: signed, bodyOnMethods`)
    else t.match(taking, signedWithBody, `${method}: signed, bodyOnMethods`)
  }
  t.equal(signedBodyMethodProblem('GET', ['GET']), 'A GET request carries no body', 'bodyOnMethods never lets a bodyless method take one')
})
