// Every error leaves as RFC 9457 problem+json with a code from the catalog (errors.ts): ours,
// Fastify's (body limits, bad JSON, schema failures) and anything unexpected (500, no details).
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import fp from 'fastify-plugin'
import { GatewayError, PROBLEM_CONTENT_TYPE, isGatewayError, type FieldError } from '../errors.js'

interface SchemaIssue {
  instancePath: string
  message?: string
  params: Record<string, unknown>
}

function fieldErrors (issues: readonly SchemaIssue[]): FieldError[] {
  return issues.map((issue) => {
    const named = issue.params.missingProperty ?? issue.params.additionalProperty
    const path = issue.instancePath.replace(/^\//, '').replaceAll('/', '.')
    const field = typeof named === 'string' ? (path === '' ? named : `${path}.${named}`) : (path === '' ? 'body' : path)
    const message = issue.params.additionalProperty !== undefined ? 'is not an accepted field' : (issue.message ?? 'is not valid')
    return { field, message }
  })
}

/** Any error -> the catalog error a client sees. */
export function toGatewayError (err: unknown): GatewayError {
  if (isGatewayError(err)) return err
  const error = err as Partial<FastifyError> & { validation?: SchemaIssue[] }
  if (Array.isArray(error.validation)) {
    const errors = fieldErrors(error.validation)
    return new GatewayError('VALIDATION_FAILED', `Invalid request: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`, { extra: { errors } })
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new GatewayError('PAYLOAD_TOO_LARGE', 'The request body is larger than this route accepts')
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'Send the body as JSON with "Content-Type: application/json"')
    case 'FST_ERR_BAD_URL':
      return new GatewayError('INVALID_TARGET', 'The request target is not a valid URI path')
  }
  const status = error.statusCode ?? 500
  if (status >= 400 && status < 500) {
    // Fastify's own client errors: malformed JSON, an empty JSON body, a bad content length.
    return new GatewayError('VALIDATION_FAILED', error.message ?? 'The request is malformed', { cause: err })
  }
  return new GatewayError('INTERNAL_ERROR', 'The gateway failed to handle this request; the failure is logged', { cause: err })
}

export function sendProblem (request: FastifyRequest, reply: FastifyReply, error: GatewayError): FastifyReply {
  request.denialReason = error.code
  if (error.headers !== undefined) reply.headers(error.headers)
  return reply.code(error.statusCode).type(PROBLEM_CONTENT_TYPE).send(error.toProblem())
}

const problems: FastifyPluginAsync = async (app) => {
  app.decorateRequest('denialReason', null)
  app.setErrorHandler((err, request, reply) => {
    const error = toGatewayError(err)
    if (error.code === 'INTERNAL_ERROR') request.log.error({ err }, 'unhandled error')
    return sendProblem(request, reply, error)
  })
  app.setNotFoundHandler((request, reply) => {
    return sendProblem(request, reply, new GatewayError('NOT_FOUND', `No route for ${request.method} ${request.url.split('?', 1)[0] ?? ''}`))
  })
}

export const problemsPlugin = fp(problems, { name: 'keygate-problems', fastify: '5.x' })
