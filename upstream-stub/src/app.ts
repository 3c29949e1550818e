import Fastify, {
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
  type FastifyServerOptions,
} from 'fastify'
import { createIdentityTokenVerifier, type IdentityTokenOptions } from './identity-token.js'
import { notFound, ProblemError, sendProblem } from './problem.js'
import { v1Routes } from './routes/v1.js'
import { ClientStore } from './store.js'
import { TransactionStore } from './transaction-store.js'
import { toFieldErrors, typeBoxValidatorCompiler } from './validation.js'

export interface UpstreamAppOptions {
  /** Fastify logger setting; off by default so tests stay quiet. */
  logger?: FastifyServerOptions['logger']
  /** Clock for created_at; tests inject one to make timestamps collide. */
  now?: () => Date
  /**
   * Require the gateway's signed identity token on every /v1 request (see
   * identity-token.ts). Unset: only x-gateway-user is checked.
   */
  identityToken?: IdentityTokenOptions | undefined
}

/** Bodies here are three short strings; anything near this size is abuse. */
const BODY_LIMIT_BYTES = 16 * 1024

/** Map anything thrown during a request to the problem we answer with. */
function toProblem (error: FastifyError): ProblemError {
  if (error instanceof ProblemError) return error

  if (error.validation !== undefined) {
    const part = error.validationContext === 'querystring' ? 'query' : (error.validationContext ?? 'request')
    return new ProblemError(
      'VALIDATION_FAILED',
      `The request ${part} is not valid.`,
      toFieldErrors(error.validation, part)
    )
  }

  switch (error.code) {
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return new ProblemError('VALIDATION_FAILED', 'The request body is not valid JSON.', [
        { field: 'body', message: 'must be a JSON object' },
      ])
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ProblemError('UNSUPPORTED_MEDIA_TYPE', 'Send the request body as application/json.')
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ProblemError('PAYLOAD_TOO_LARGE', `The request body exceeds ${BODY_LIMIT_BYTES} bytes.`)
  }

  // Other client errors raised by fastify itself (bad URL encoding, mismatched
  // content-length, ...) carry messages that are safe to show.
  if (error.statusCode !== undefined && error.statusCode >= 400 && error.statusCode < 500) {
    return new ProblemError('BAD_REQUEST', error.message)
  }
  return new ProblemError('INTERNAL_ERROR', 'An unexpected error occurred.', undefined, { cause: error })
}

function handleError (error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const problem = toProblem(error)
  // The cause (the original error, or e.g. why a token was refused) is for
  // operators; the caller only ever sees the problem body.
  const cause: unknown = problem.cause
  if (problem.status >= 500) {
    request.log.error({ err: cause ?? error, code: problem.code }, 'request failed')
  } else {
    const reason = cause instanceof Error ? cause.message : undefined
    request.log.info({ code: problem.code, reason }, problem.message)
  }
  return sendProblem(reply, problem)
}

export async function buildUpstreamApp (opts: UpstreamAppOptions = {}): Promise<FastifyInstance> {
  // First, so a bad setting fails the start (with nothing to clean up), not a request.
  const identityToken = opts.identityToken === undefined ? undefined : createIdentityTokenVerifier(opts.identityToken)

  const app = Fastify({
    logger: opts.logger ?? false,
    bodyLimit: BODY_LIMIT_BYTES,
    // Errors raised while routing (e.g. a malformed %-escape in the URL) skip
    // setErrorHandler; route them through the same problem+json mapping.
    frameworkErrors: handleError,
  })

  app.setValidatorCompiler(typeBoxValidatorCompiler)
  // Only JSON is accepted. Without this, fastify's built-in text/plain parser
  // would hand the handler a string and the caller would get a confusing
  // "body must be an object" instead of 415.
  app.removeContentTypeParser('text/plain')

  app.setErrorHandler(handleError)
  app.setNotFoundHandler(notFound)

  if (identityToken !== undefined) {
    const { jwksUrl, header, issuer, audience } = identityToken.settings
    app.log.info(
      { jwksUrl: jwksUrl.href, header, issuer, audience: audience ?? null },
      'identity tokens are required on /v1'
    )
  }

  // Public: for container health checks and for a gateway's `public` route; says nothing about users.
  app.get('/healthz', async () => ({ status: 'ok' }))

  await app.register(v1Routes, {
    prefix: '/v1',
    clients: new ClientStore(opts.now),
    transactions: new TransactionStore(opts.now),
    identityToken,
  })
  return app
}
