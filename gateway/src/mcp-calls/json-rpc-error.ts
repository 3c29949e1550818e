// What a client of an MCP route sees when keygate refuses a request: a JSON-RPC error response
// (application/json) that an MCP client library reads, carrying the request's id (null when the
// body had none that could be read), with the HTTP status and headers (WWW-Authenticate,
// Retry-After) of the refusal unchanged. The catalog code and the whole problem are its `data`.
import type { GatewayError } from '../errors.js'

/** JSON-RPC 2.0's codes: the body is no JSON (-32700) or no valid request (-32600); keygate's refusals of a valid one: -32001 */
const RPC_CODES: Partial<Record<string, number>> = {
  MCP_PARSE_ERROR: -32700,
  MCP_INVALID_MESSAGE: -32600,
  MCP_BATCH_NOT_ALLOWED: -32600,
  UNSUPPORTED_MEDIA_TYPE: -32600,
  PAYLOAD_TOO_LARGE: -32600
}
export const REFUSED_RPC_CODE = -32001

export function jsonRpcError (error: GatewayError, id: string | number | null): string {
  const problem = error.toProblem()
  return JSON.stringify({
    jsonrpc: '2.0',
    id,
    error: { code: RPC_CODES[error.code] ?? REFUSED_RPC_CODE, message: `${problem.title}: ${problem.detail}`, data: problem }
  })
}
