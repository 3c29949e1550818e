// The route options of the two signature schemes: `signature` (seed, rfc9421, any: the default)
// and `signatureLabel` (an RFC 9421 label), each only on signed routes, and no label on a route
// that takes the seed's scheme only.
import t from 'tap'
import { routeEntryProblems as problems, routesOfEntry as load } from '../../../helpers/routes.js'

t.test('defaults and accepted values', async (t) => {
  const [plain] = load('auth: signed')
  t.equal(plain?.signature, 'any')
  t.equal(plain?.signatureLabel, undefined)
  for (const signature of ['seed', 'rfc9421', 'any']) t.equal(load(`auth: signed\nsignature: ${signature}`)[0]?.signature, signature)
  t.equal(load('auth: signed\nsignature: rfc9421\nsignatureLabel: gw-1')[0]?.signatureLabel, 'gw-1')
})

t.test('mistakes, each named', async (t) => {
  t.same(problems('auth: signed\nsignature: cavage'), ['routes.yaml: routes[0].signature: "cavage" is not one of any, seed, rfc9421'])
  t.match(problems('auth: signed\nsignatureLabel: Sig'), [/routes\[0\]\.signatureLabel: "Sig" is not a signature label/])
  t.same(problems('auth: bearer\nsignature: rfc9421'),
    ['routes.yaml: routes[0].signature: only a signed route verifies signatures; give it auth: signed, or drop it'])
  t.same(problems('auth: public\nsignatureLabel: sig'),
    ['routes.yaml: routes[0].signatureLabel: only a signed route verifies signatures; give it auth: signed, or drop it'])
  t.match(problems('auth: signed\nsignature: seed\nsignatureLabel: sig'), [/signatureLabel: labels are RFC 9421's/])
})
