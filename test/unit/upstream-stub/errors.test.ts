import t from 'tap'
import { as, build, expectProblem } from '../../helpers/upstream-stub.js'
import { problemType } from '../../../upstream-stub/src/problem.js'

t.test('unknown routes are 404 problem+json', async (t) => {
  const cases: Array<[string, string, Record<string, string>]> = [
    ['GET', '/', {}],
    ['GET', '/nope', {}],
    ['GET', '/v1', {}],
    ['GET', '/v2/clients/', as('alice')],
    // The collection is exactly /v1/clients/; the slash-less form is not an alias.
    ['GET', '/v1/clients', as('alice')],
    ['POST', '/v1/clients', as('alice')],
    ['GET', '/v1/clientsX', as('alice')],
    ['GET', '/v1/clients/some-id/', as('alice')],
    ['GET', '/v1/clients/some-id/extra', as('alice')],
    ['PUT', '/v1/clients/', as('alice')],
    ['DELETE', '/v1/clients/some-id', as('alice')],
    ['PATCH', '/v1/clients/some-id', as('alice')],
  ]
  for (const [method, url, headers] of cases) {
    t.test(`${method} ${url}`, async (t) => {
      const app = await build(t)
      const res = await app.inject({ method: method as 'GET', url, headers })
      expectProblem(t, res, 404, 'NOT_FOUND')
    })
  }
})

t.test('a malformed URL is a 400 problem, not fastify\'s default JSON', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/v1/clients/%zz', headers: as('alice') })
  expectProblem(t, res, 400, 'BAD_REQUEST')
})

t.test('unexpected errors are 500 INTERNAL_ERROR without leaking details', async (t) => {
  const app = await build(t)
  app.get('/boom', async () => {
    throw new Error('db password is hunter2')
  })
  const res = await app.inject({ method: 'GET', url: '/boom' })
  const problem = expectProblem(t, res, 500, 'INTERNAL_ERROR')
  t.notMatch(res.body, /hunter2/)
  t.notMatch(res.body, /\bat .+:\d+:\d+/, 'no stack frames')
  t.same(Object.keys(problem).sort(), ['code', 'detail', 'status', 'title', 'type'])
})

t.test('problem type URNs', async (t) => {
  t.equal(problemType('VALIDATION_FAILED'), 'urn:keygate:problem:validation-failed')
  t.equal(problemType('NOT_FOUND'), 'urn:keygate:problem:not-found')
  t.equal(problemType('INTERNAL_ERROR'), 'urn:keygate:problem:internal-error')
})
