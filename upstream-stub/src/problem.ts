import type { FastifyReply, FastifyRequest } from 'fastify'

/**
 * Every problem code this service can emit. The status and title are fixed per
 * code so clients (and the gateway) can branch on `code` alone; only `detail`
 * and `errors` vary between occurrences.
 */
export const PROBLEMS = {
  BAD_REQUEST: { status: 400, title: 'Bad request' },
  VALIDATION_FAILED: { status: 400, title: 'Request validation failed' },
  MISSING_IDENTITY: { status: 401, title: 'Missing user identity' },
  MISSING_IDENTITY_TOKEN: { status: 401, title: 'Missing identity token' },
  INVALID_IDENTITY_TOKEN: { status: 401, title: 'Invalid identity token' },
  NOT_FOUND: { status: 404, title: 'Resource not found' },
  CLIENT_EXISTS: { status: 409, title: 'Client already exists' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'Payload too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Unsupported media type' },
  INTERNAL_ERROR: { status: 500, title: 'Internal server error' },
  IDENTITY_KEYS_UNAVAILABLE: { status: 503, title: 'Identity keys unavailable' },
} as const satisfies Record<string, { status: number; title: string }>

export type ProblemCode = keyof typeof PROBLEMS

export const PROBLEM_CONTENT_TYPE = 'application/problem+json'

export interface FieldError {
  field: string
  message: string
}

/** RFC 9457 body, extended with our stable `code` and optional per-field `errors`. */
export interface ProblemBody {
  type: string
  title: string
  status: number
  detail: string
  code: ProblemCode
  errors?: FieldError[]
}

/** `VALIDATION_FAILED` -> `urn:keygate:problem:validation-failed` */
export function problemType (code: ProblemCode): string {
  return `urn:keygate:problem:${code.toLowerCase().replaceAll('_', '-')}`
}

/**
 * Thrown from hooks and handlers; the app's error handler turns it into a
 * response. Being an Error keeps fastify's control flow (throw in async
 * handlers) and lets anything else that throws fall through to INTERNAL_ERROR.
 */
export class ProblemError extends Error {
  readonly code: ProblemCode
  readonly status: number
  readonly errors: FieldError[] | undefined

  /**
   * `options.cause` is for the log only (see the app's error handler): it never
   * reaches the response body.
   */
  constructor (code: ProblemCode, detail: string, errors?: FieldError[], options?: ErrorOptions) {
    super(detail, options)
    this.name = 'ProblemError'
    this.code = code
    this.status = PROBLEMS[code].status
    this.errors = errors
  }

  toBody (): ProblemBody {
    const body: ProblemBody = {
      type: problemType(this.code),
      title: PROBLEMS[this.code].title,
      status: this.status,
      detail: this.message,
      code: this.code,
    }
    if (this.errors !== undefined) body.errors = this.errors
    return body
  }
}

export function sendProblem (reply: FastifyReply, problem: ProblemError): FastifyReply {
  return reply.code(problem.status).type(PROBLEM_CONTENT_TYPE).send(problem.toBody())
}

export function notFound (request: FastifyRequest, reply: FastifyReply): FastifyReply {
  // Path only: echoing the query string could reflect cursors or other noise.
  const path = request.url.split('?', 1)[0]
  return sendProblem(reply, new ProblemError('NOT_FOUND', `No route for ${request.method} ${path}.`))
}
