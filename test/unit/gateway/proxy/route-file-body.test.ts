// The route options of the body rules of signed routes: `seedBodyBoundary` (enforced: the default,
// or unchecked) and `bodyOnMethods` (DELETE, OPTIONS), each only where it means something, and the
// warning routes check and the start/reload log give for a route that opts out of the seed body rule.
import t from 'tap'
import { routeEntryProblems as problems, routesOfEntry as load } from '../../../helpers/routes.js'
import { routeOptOuts } from '../../../../gateway/src/proxy/route-opt-outs.js'

t.test('defaults and accepted values', async (t) => {
  const [plain] = load('auth: signed')
  t.equal(plain?.seedBodyBoundary, 'enforced', 'the body rule is on by default')
  t.same(plain?.bodyOnMethods, [], 'no method without a body takes one by default')
  t.equal(load('auth: signed\nseedBodyBoundary: unchecked')[0]?.seedBodyBoundary, 'unchecked')
  t.same(load('auth: signed\nbodyOnMethods: [DELETE, OPTIONS]')[0]?.bodyOnMethods, ['DELETE', 'OPTIONS'])
  t.equal(load('auth: signed\nsignature: seed\nseedBodyBoundary: enforced')[0]?.seedBodyBoundary, 'enforced')
})

t.test('mistakes: each named, with what is allowed', async (t) => {
  const cases: Array<[string, string, Array<string | RegExp>]> = [
    ['an unknown value', 'auth: signed\nseedBodyBoundary: off', ['routes.yaml: routes[0].seedBodyBoundary: "off" is not one of enforced, unchecked']],
    ['on a bearer route', 'auth: bearer\nseedBodyBoundary: unchecked',
      ['routes.yaml: routes[0].seedBodyBoundary: only a signed route verifies seed signatures; give it auth: signed, or drop it']],
    ['on an RFC 9421 route', 'auth: signed\nsignature: rfc9421\nseedBodyBoundary: unchecked', [/routes\[0\]\.seedBodyBoundary: the rule is the seed scheme's.*drop it$/]],
    ['GET in bodyOnMethods', 'auth: signed\nbodyOnMethods: [GET]', ['routes.yaml: routes[0].bodyOnMethods[0]: "GET" is not one of DELETE, OPTIONS']],
    ['POST in bodyOnMethods', 'auth: signed\nbodyOnMethods: [POST]', ['routes.yaml: routes[0].bodyOnMethods[0]: "POST" is not one of DELETE, OPTIONS']],
    ['an empty bodyOnMethods', 'auth: signed\nbodyOnMethods: []', ['routes.yaml: routes[0].bodyOnMethods: must not be empty']],
    ['a method the route does not take', 'auth: signed\nmethods: [GET, POST]\nbodyOnMethods: [DELETE]',
      ['routes.yaml: routes[0].bodyOnMethods: DELETE is not among the route\'s methods; add it there, or drop it here']],
    ['bodyOnMethods on a public route', 'auth: public\nbodyOnMethods: [DELETE]',
      ['routes.yaml: routes[0].bodyOnMethods: only a signed route refuses a body on DELETE and OPTIONS, so only one takes it back; drop it']]
  ]
  for (const [name, entry, expected] of cases) t.match(problems(entry), expected, name)
})

t.test('a route that opts out of the seed body rule is warned of, saying what it lets through', async (t) => {
  t.same(routeOptOuts(load('auth: signed')), [], 'the default: nothing to warn of')
  t.same(routeOptOuts(load('auth: signed\nbodyOnMethods: [DELETE]')), [], 'a body on DELETE is not an opt-out of the body rule')
  const [warning, ...more] = routeOptOuts(load('auth: signed\nseedBodyBoundary: unchecked'))
  t.equal(more.length, 0)
  t.equal(warning?.route.name, 'a')
  t.match(warning?.text, /^a \(signed\) has seedBodyBoundary: unchecked: .*one seed signature also authorizes the requests its bytes split into another way/)
  t.match(warning?.text, /RFC 9421/, 'and says what to do instead')
})
