// Every error leaves as RFC 9457 problem+json with a code from the catalog (errors.ts): ours,
// Fastify's (body limits, bad JSON, schema failures) and anything unexpected (500, no details).
import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http'
import type { Duplex } from 'node:stream'
import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest, FastifyServerOptions } from 'fastify'
import fp from 'fastify-plugin'
import { HTTP_METHODS, pathOf } from '#client/protocol'
import { GatewayError, PROBLEM_CONTENT_TYPE, isGatewayError, type FieldError } from '../../errors.js'
import { jsonRpcError } from '../../mcp-calls/json-rpc-error.js'
import { resourceChallenge, tokenChallenges } from '../../resources/challenge.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** the error code that denied the request, for the access log and the metrics */
    denialReason: string | null
  }
}

interface SchemaIssue {
  instancePath: string
  keyword?: string
  message?: string
  params: Record<string, unknown>
}

/** What a schema issue means, in words a user understands ("is empty", not "must NOT have fewer than 1 characters"). */
function issueWords (issue: SchemaIssue): string {
  const { keyword, params } = issue
  const limit = Number(params.limit)
  switch (keyword) {
    case 'required': return 'is missing'
    case 'additionalProperties': return 'is not an accepted field'
    case 'type': return `must be ${/^[aeiou]/.test(String(params.type)) ? 'an' : 'a'} ${String(params.type)}`
    case 'minLength': return limit === 1 ? 'is empty' : `is shorter than ${limit} characters`
    case 'maxLength': return `is longer than ${limit} characters`
    case 'minItems': return limit === 1 ? 'is empty' : `has fewer than ${limit} items`
    case 'maxItems': return `has more than ${limit} items`
    case 'minimum': return `must be ${limit} or more`
    case 'maximum': return `must be ${limit} or less`
    case 'enum': return `must be one of ${(params.allowedValues as unknown[] | undefined)?.map((v) => JSON.stringify(v)).join(', ') ?? 'the accepted values'}`
    case 'const': return `must be ${JSON.stringify(params.allowedValue)}`
    case 'pattern': return 'is not in the accepted form'
    case 'format': return `is not a valid ${String(params.format)}`
    default: return issue.message ?? 'is not valid'
  }
}

function fieldErrors (issues: readonly SchemaIssue[]): FieldError[] {
  return issues.map((issue) => {
    const named = issue.params.missingProperty ?? issue.params.additionalProperty
    const path = issue.instancePath.replace(/^\//, '').replaceAll('/', '.')
    const field = typeof named === 'string' ? (path === '' ? named : `${path}.${named}`) : (path === '' ? 'body' : path)
    return { field, message: issueWords(issue) }
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
  // a protected resource's route: the challenge points at its metadata (either mode: request.forward is its route)
  const resource = request.forward?.route.resource
  const auth = request.auth
  const challenge = resource === undefined ? undefined : resourceChallenge(error, resource, auth?.idpIssuer)
  // a route that takes tokens: DPoP's challenge beside Bearer's, or alone where DPoP is required (RFC 9449 §7.1)
  const challenges = auth?.dpop === undefined
    ? undefined
    : tokenChallenges(error, challenge ?? error.headers?.['www-authenticate'],
      { algs: auth.dpop.algs, required: auth.dpopRequired === true, scheme: auth.tokenScheme }, resource)
  // one field line, the challenges comma-separated (RFC 9110 §11.6.1): a proxy in decision mode that
  // copies one WWW-Authenticate (nginx's auth_request_set) copies both
  if (challenges !== undefined) reply.header('www-authenticate', challenges.join(', '))
  else if (challenge !== undefined) reply.header('www-authenticate', challenge)
  // an MCP route answers as JSON-RPC, which its clients read (mcp-calls/json-rpc-error.ts)
  if (request.forward?.route.mcp !== undefined) {
    return reply.code(error.statusCode).type('application/json').send(jsonRpcError(error, request.auth?.mcpId ?? null))
  }
  return reply.code(error.statusCode).type(PROBLEM_CONTENT_TYPE).send(error.toProblem())
}

/** llhttp's codes for a header line it cannot read: where a value broken over lines stops it. */
const HEADER_LINE_ERRORS = new Set(['HPE_CR_EXPECTED', 'HPE_LF_EXPECTED', 'HPE_INVALID_HEADER_TOKEN'])

/**
 * The header whose line the parser stopped in, lower case, when the bytes it had show it. A value
 * broken over lines stops it at the bare LF inside the line (curl sends `$(... | base64)` so), or
 * on the next line, which starts with whitespace or has no colon: then the line before is blamed.
 * Undefined when the packet does not hold the line's start (it came in an earlier chunk).
 */
export function headerAtFault (packet: Buffer, position: number): string | undefined {
  const lines = packet.subarray(0, Math.max(0, Math.min(position, packet.length))).toString('latin1').split('\r\n')
  // lines[0] is the request line, or the end of a line begun in an earlier chunk: never a header here
  let index = lines.length - 1
  const current = lines[index] ?? ''
  if (/^[ \t]/.test(current) || !current.includes(':')) index--
  const line = index >= 1 ? lines[index] ?? '' : ''
  const colon = line.indexOf(':')
  return colon > 0 ? line.slice(0, colon).toLowerCase() : undefined
}

type ParserError = Error & { code?: string; rawPacket?: unknown; bytesParsed?: unknown }

function malformed (err: ParserError): GatewayError {
  if (HEADER_LINE_ERRORS.has(err.code ?? '') && Buffer.isBuffer(err.rawPacket) && typeof err.bytesParsed === 'number' &&
    headerAtFault(err.rawPacket, err.bytesParsed) === 'x-api-signature') {
    // `base64` and `openssl base64` wrap their output; the header then holds line breaks, which
    // HTTP/1.1 forbids. Saying so beats a generic framing error for the most common signing slip.
    return new GatewayError('MALFORMED_HTTP', 'X-API-Signature holds a line break, which no header may: encode the signature in base64 on ' +
      'one line (base64 -w0, or openssl base64 -A). Plain base64 and openssl base64 break their output into lines')
  }
  return new GatewayError('MALFORMED_HTTP', 'The request is not well-formed HTTP/1.1 (framing, header syntax or line endings)')
}

/**
 * Errors Node's HTTP parser meets before Fastify has a request (smuggling attempts, bare LF,
 * oversized headers): answered as problem+json on the raw socket, and the connection closed.
 */
export function clientErrorHandler (err: ParserError, socket: Duplex): void {
  if (!socket.writable || answering.has(socket)) return
  answering.add(socket)
  afterAnswersInFlight(socket, (current) => {
    if (!socket.writable) return
    // The request the error is in was already answered (a refusal can go out before its body
    // arrives, and the body then turns out malformed): one request gets one answer; close after
    // it. Node's own clientError handling makes the same check.
    if (current?.headersSent === true) {
      socket.end()
      return
    }
    writeProblem(socket, clientError(err))
  })
}

/** Sockets whose malformed request is being answered: the parser may report more errors meanwhile. */
const answering = new WeakSet<Duplex>()

/** The response Node is writing on a socket: pipelined requests' responses follow it, one at a time. */
type InFlight = ServerResponse & { req?: IncomingMessage }

/**
 * Calls `then` once every response in flight on `socket` for a complete request has finished:
 * a request the gateway accepted (a forwarded POST, say) was pipelined ahead of the malformed
 * bytes, and its answer is delivered before the 400 that closes the connection. Node assigns
 * the next queued response to the socket as one finishes, so this walks them in order. It stops
 * at a request whose own body the error is in (incomplete): `then` gets that one's response.
 */
function afterAnswersInFlight (socket: Duplex, then: (current: InFlight | undefined) => void): void {
  const current = (socket as Duplex & { _httpMessage?: InFlight | null })._httpMessage ?? undefined
  if (current === undefined || current.writableFinished || current.req?.complete !== true) {
    then(current)
    return
  }
  let done = false
  const next = (): void => {
    if (done) return
    done = true
    current.off('finish', next)
    current.off('close', next)
    // Node's own 'finish' listener (added first) has assigned the next queued response by now
    afterAnswersInFlight(socket, then)
  }
  current.once('finish', next)
  current.once('close', next)
}

function clientError (err: ParserError): GatewayError {
  return err.code === 'HPE_HEADER_OVERFLOW'
    ? new GatewayError('HEADERS_TOO_LARGE', 'The request headers are larger than the gateway accepts')
    : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? new GatewayError('REQUEST_TIMEOUT', 'The request headers or body did not arrive in time')
      : malformed(err)
}

/** A whole problem+json answer written to a raw socket, which is then closed. */
function writeProblem (socket: Duplex, error: GatewayError): void {
  const body = JSON.stringify(error.toProblem())
  const extra = Object.entries(error.headers ?? {}).map(([name, value]) => `${name}: ${value}\r\n`).join('')
  socket.end(`HTTP/1.1 ${error.statusCode} ${STATUS_CODES[error.statusCode] ?? ''}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n${extra}Connection: close\r\n\r\n${body}`)
}

/** CONNECT (a proxy tunnel request): keygate is no forward proxy. */
export function refuseConnect (_request: unknown, socket: Duplex): void {
  writeProblem(socket, new GatewayError('METHOD_NOT_ALLOWED', 'keygate is not a forward proxy; CONNECT is not accepted', {
    headers: { allow: HTTP_METHODS.join(', ') }
  }))
}

/** Errors Fastify meets before routing (a path that does not decode): problem+json as well. */
export const frameworkErrors: NonNullable<FastifyServerOptions['frameworkErrors']> = (err, request, reply) => {
  const error = err.code === 'FST_ERR_BAD_URL'
    ? new GatewayError('INVALID_TARGET', 'The request target is not a valid URI path')
    : toGatewayError(err)
  request.log.info({ reason: error.code }, 'refused before routing')
  void (reply as FastifyReply).code(error.statusCode).type(PROBLEM_CONTENT_TYPE).send(error.toProblem())
}

const problems: FastifyPluginAsync = async (app) => {
  app.decorateRequest('denialReason', null)
  app.setErrorHandler((err, request, reply) => {
    const error = toGatewayError(err)
    if (error.code === 'INTERNAL_ERROR') request.log.error({ err }, 'unhandled error')
    return sendProblem(request, reply, error)
  })
  app.setNotFoundHandler((request, reply) => {
    return sendProblem(request, reply, new GatewayError('NOT_FOUND', `No route for ${request.method} ${pathOf(request.url)}`))
  })
}

export const problemsPlugin = fp(problems, { name: 'keygate-problems', fastify: '5.x' })
