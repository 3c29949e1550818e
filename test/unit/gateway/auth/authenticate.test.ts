import type { FastifyReply, FastifyRequest } from 'fastify'
import t from 'tap'
import { asHook, authenticate, createAuthenticator, markLoggedIn } from '../../../../gateway/src/auth/authenticate.js'
import type { AuthStage, AuthState } from '../../../../gateway/src/auth/stage.js'
import { GatewayError } from '../../../../gateway/src/errors.js'
import { captureGatewayError, fakeRequest } from '../../../helpers/auth-fixtures.js'

type Fresh = FastifyRequest & { auth: AuthState | null; authenticated: boolean }
const fresh = (): Fresh => Object.assign(fakeRequest(), { auth: null, authenticated: false }) as Fresh

/** A stage that notes its run in `ran`, and is synchronous unless `async` says otherwise. */
function stage (name: string, ran: string[], options: { needsBody?: boolean; async?: boolean; fails?: boolean } = {}): AuthStage {
  return {
    name,
    needsBody: options.needsBody ?? false,
    run (_request, state) {
      const act = (): void => {
        ran.push(name)
        if (options.fails === true) throw new GatewayError('INVALID_TOKEN', `${name} refused`)
        state.user = name
      }
      if (options.async === true) return Promise.resolve().then(act)
      act()
    }
  }
}

t.test('a tier runs its header stages before the body and its body stages after, in order', async (t) => {
  const ran: string[] = []
  const authenticator = createAuthenticator({
    signed: [stage('a', ran), stage('b', ran, { needsBody: true }), stage('c', ran), stage('d', ran, { needsBody: true })],
    bearer: [],
    agent: [],
    public: []
  })
  const request = fresh()
  t.equal(authenticator.beforeBody(request, 'signed', { replay: 'allow' }), undefined, 'synchronous stages: no promise')
  t.same(ran, ['a', 'c'])
  t.equal(request.auth?.replay, 'allow', 'the route\'s state is where the stages write')
  t.equal(request.authenticated, false, 'not authenticated while body stages remain')
  t.equal(authenticator.afterBody(request, 'signed'), undefined)
  t.same(ran, ['a', 'c', 'b', 'd'])
  t.equal(request.authenticated, true)
  t.equal(request.auth?.user, 'd', 'each stage saw the state of the ones before')
})

t.test('a tier with nothing to check in the body is authenticated once its header stages pass', async (t) => {
  const ran: string[] = []
  const authenticator = createAuthenticator({ signed: [], bearer: [stage('bearer', ran, { async: true })], agent: [], public: [] })
  const request = fresh()
  const pending = authenticator.beforeBody(request, 'bearer')
  t.ok(pending instanceof Promise, 'an asynchronous stage makes the phase a promise')
  t.equal(request.authenticated, false, 'not before the stage has passed')
  await pending
  t.equal(request.authenticated, true)
  t.equal(request.auth?.user, 'bearer')
})

t.test('the public tier authenticates at once, with no stage', async (t) => {
  const request = fresh()
  t.equal(createAuthenticator({ signed: [], bearer: [], agent: [], public: [] }).beforeBody(request, 'public'), undefined)
  t.equal(request.authenticated, true)
  t.same(request.auth, {})
})

t.test('a refusing stage stops the phase: later stages do not run, the request is not authenticated', async (t) => {
  for (const async of [false, true]) {
    const ran: string[] = []
    const authenticator = createAuthenticator({
      signed: [stage('first', ran, { async, fails: true }), stage('second', ran)],
      bearer: [],
      agent: [],
      public: []
    })
    const request = fresh()
    const err = await captureGatewayError(() => authenticator.beforeBody(request, 'signed'))
    t.equal(err.code, 'INVALID_TOKEN', async ? 'asynchronous' : 'synchronous')
    t.same(ran, ['first'])
    t.equal(request.authenticated, false)
  }
})

t.test('authenticate(tier): the hooks of a fixed-tier route call done once, with the refusal if any', async (t) => {
  const ran: string[] = []
  const authenticator = createAuthenticator({
    signed: [],
    bearer: [stage('token', ran, { async: true })],
    agent: [],
    public: []
  })
  const hooks = authenticate(authenticator, 'bearer')
  const request = fresh()
  const doneWith = await new Promise<unknown[]>((resolve) => {
    hooks.onRequest(request, {} as FastifyReply, (...args: unknown[]) => { resolve(args) })
  })
  t.same(doneWith, [], 'done() without an error')
  t.equal(request.authenticated, true)

  const refusing = authenticate(createAuthenticator({ signed: [], bearer: [stage('token', [], { fails: true })], agent: [], public: [] }), 'bearer')
  const refused = fresh()
  const args = await new Promise<unknown[]>((resolve) => {
    refusing.onRequest(refused, {} as FastifyReply, (...a: unknown[]) => { resolve(a) })
  })
  t.equal((args[0] as GatewayError).code, 'INVALID_TOKEN', 'done(err) with the stage\'s refusal')
  t.equal(refused.authenticated, false)
})

t.test('asHook: a synchronous step calls done before returning; a thrown error is passed to done', async (t) => {
  const calls: unknown[][] = []
  asHook(() => {})(fresh(), {} as FastifyReply, (...args: unknown[]) => { calls.push(args) })
  t.same(calls, [[]], 'called at once, not on a later tick')
  const boom = new GatewayError('MISSING_TOKEN', 'no token')
  asHook(() => { throw boom })(fresh(), {} as FastifyReply, (...args: unknown[]) => { calls.push(args) })
  t.equal(calls[1]?.[0], boom)
})

t.test('markLoggedIn: a login counts as authenticated', async (t) => {
  const request = fresh()
  markLoggedIn(request)
  t.equal(request.authenticated, true)
})
