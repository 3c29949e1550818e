// The one way keygate authenticates a request, for its own key routes, the proxy and decisions
// alike: the stages of a tier's pipeline, split at the body, over a description of the request
// (described-request.ts). Stages that do not need the body run first (inline: in onRequest, so a
// request that fails a cheap check is refused before its body is buffered); the others once the
// body is known. Inline, only this file sets what a request is known to be (request.auth) and
// that it passed (request.authenticated).
import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify'
import type { DescribedRequest } from './described-request.js'
import { describeInline, withBody } from './inline-request.js'
import { runStages } from './pipeline.js'
import type { AuthStage, AuthState, AuthTier } from './stage.js'

export type Pipelines = Record<AuthTier, readonly AuthStage[]>

declare module 'fastify' {
  interface FastifyRequest {
    /** what authentication established about this request (user, key); null until it starts */
    auth: AuthState | null
    /** the request passed authentication: its tier's last stage, or a login */
    authenticated: boolean
  }
}

/** A tier's pipeline over a described request, in its two phases; it passed when both return (or resolve). */
export interface Judge {
  /** the stages that need no body, with `state` (what the route decided, e.g. its replay policy) */
  beforeBody: (request: DescribedRequest, tier: AuthTier, state: AuthState) => void | Promise<void>
  /** the stages that read the body (request.body set) */
  afterBody: (request: DescribedRequest, tier: AuthTier, state: AuthState) => void | Promise<void>
}

export interface Authenticator {
  /** the pipelines, for a mode that describes its requests itself (decision mode) */
  judge: Judge
  /** Starts a request's authentication with `state` (what the route decided, e.g. its replay policy). */
  beforeBody: (request: FastifyRequest, tier: AuthTier, state?: AuthState) => void | Promise<void>
  /** Finishes it: the stages that read the body; the request is then authenticated. */
  afterBody: (request: FastifyRequest, tier: AuthTier) => void | Promise<void>
}

const passed = (request: FastifyRequest): void => { request.authenticated = true }

/** `next` after `pending`: at once when nothing is pending (no promise, no microtask). */
function afterwards<R> (pending: void | Promise<void>, next: (request: R) => void, request: R): void | Promise<void> {
  if (pending === undefined) {
    next(request)
    return
  }
  return pending.then(() => { next(request) })
}

type Hook = (request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => void

export function createAuthenticator (pipelines: Pipelines): Authenticator {
  const phases = Object.fromEntries(Object.entries(pipelines).map(([tier, stages]) => [tier, {
    beforeBody: stages.filter((stage) => !stage.needsBody),
    afterBody: stages.filter((stage) => stage.needsBody)
  }])) as Record<AuthTier, { beforeBody: AuthStage[]; afterBody: AuthStage[] }>
  const judge: Judge = {
    beforeBody: (request, tier, state) => runStages(phases[tier].beforeBody, request, state),
    afterBody: (request, tier, state) => runStages(phases[tier].afterBody, request, state)
  }
  return {
    judge,
    beforeBody (request, tier, state = {}) {
      request.auth = state
      const pending = judge.beforeBody(describeInline(request), tier, state)
      // A tier with nothing to check in the body is done once its header checks pass.
      return phases[tier].afterBody.length === 0 ? afterwards(pending, passed, request) : pending
    },
    afterBody (request, tier) {
      const state = request.auth ?? (request.auth = {})
      return afterwards(judge.afterBody(withBody(request), tier, state), passed, request)
    }
  }
}

/** A login that succeeded: the one other way a request counts as authenticated (the metrics). */
export function markLoggedIn (request: FastifyRequest): void {
  request.authenticated = true
}

/**
 * Runs a possibly asynchronous step as a callback-style hook: every request runs these, and an
 * async hook would cost a promise and a microtask each, even when every stage is synchronous.
 */
export function asHook (step: (request: FastifyRequest, reply: FastifyReply) => void | Promise<void>): Hook {
  return (request, reply, done) => {
    let pending: void | Promise<void>
    try {
      pending = step(request, reply)
    } catch (err) {
      done(err as Error)
      return
    }
    if (pending === undefined) done()
    else pending.then(() => { done() }, done)
  }
}

/** The hooks of routes that all take one tier (keygate's own key routes). */
export function authenticate (authenticator: Authenticator, tier: AuthTier): { onRequest: Hook; preHandler: Hook } {
  return {
    onRequest: asHook((request) => authenticator.beforeBody(request, tier)),
    preHandler: asHook((request) => authenticator.afterBody(request, tier))
  }
}
