// An MCP route's stages (the route's `mcp`; docs/mcp.md). Before the body: the Origin (DNS
// rebinding: a browser page may not reach a local MCP server through keygate) and the content
// type. Once the body is read: its JSON-RPC messages, read once and strictly (mcp-calls/messages.ts),
// before any signature is verified; and after the scope stage, each message authorized against
// the route's policy (mcp-calls/policy.ts) with the scopes the scope stage found, so every tier that has
// scopes (keys, keygate's and IdPs' tokens, users' agents) is judged by one scope model. The
// upstream receives the bytes read here: nothing re-serialises the body. On routes without `mcp`
// each stage costs one property check.
import { GatewayError } from '../errors.js'
import { mediaTypeParts } from '../lib/http-headers.js'
import { protocolVersion, readMcpBody, type IdSink } from '../mcp-calls/messages.js'
import { judge, shortfall } from '../mcp-calls/policy.js'
import { scopeSet } from '../users/scopes.js'
import { UNSEEN_BODY, unseenBodyError } from './described-request.js'
import { insufficientScope } from './scope.js'
import type { AuthStage } from './stage.js'

const NO_SCOPES = scopeSet([])

/** application/json, with at most a UTF-8 charset */
function isJson (contentType: string | undefined): boolean {
  const [type, ...params] = mediaTypeParts(contentType)
  return type === 'application/json' && params.every((param) => param === 'charset=utf-8' || param === 'charset="utf-8"')
}

/** 403 ORIGIN_NOT_ALLOWED for an Origin the route does not list; 415 for a POST that is not JSON. */
export function mcpRequestStage (): AuthStage {
  return {
    name: 'mcp-request',
    needsBody: false,
    run (request, state) {
      const policy = state.mcp
      if (policy === undefined) return
      const origin = request.field('origin')
      if (origin !== undefined && (origin.length !== 1 || !policy.origins.has(origin[0] as string))) {
        throw new GatewayError('ORIGIN_NOT_ALLOWED', `The Origin ${JSON.stringify(origin.join(', '))} is not one this MCP route allows ` +
          '(its mcp.origins); a browser page of another origin may not call it')
      }
      if (request.method === 'POST' && !isJson(request.headers['content-type'])) {
        throw new GatewayError('UNSUPPORTED_MEDIA_TYPE', 'An MCP message is sent with "Content-Type: application/json"')
      }
    }
  }
}

/** The body's messages, read once (400 when there is not exactly one reading). */
export function mcpMessageStage (): AuthStage {
  return {
    name: 'mcp-message',
    needsBody: true,
    run (request, state) {
      if (state.mcp === undefined) return
      const body = request.body
      if (body === UNSEEN_BODY) throw unseenBodyError('an MCP route judges the JSON-RPC messages in it')
      if (request.method !== 'POST') {
        if (body !== undefined && body.length > 0) throw new GatewayError('MCP_INVALID_MESSAGE', `An MCP ${request.method} carries no body`)
        state.mcpMessages = []
        return
      }
      if (body === undefined || body.length === 0) throw new GatewayError('MCP_INVALID_MESSAGE', 'An MCP POST carries a JSON-RPC message; the body is empty')
      const version = protocolVersion(request.headers['mcp-protocol-version'])
      const sink: IdSink = {}
      try {
        state.mcpMessages = readMcpBody(body, version, sink)
      } finally {
        // a refused message that had a readable id: the JSON-RPC error carries it
        if (sink.id !== undefined) state.mcpId = sink.id
      }
    }
  }
}

/** Each message against the route's policy: 403 INSUFFICIENT_SCOPE (or MCP_CALL_DENIED) for the first it refuses. */
export function mcpPolicyStage (): AuthStage {
  return {
    name: 'mcp-policy',
    needsBody: true,
    run (_request, state) {
      const policy = state.mcp
      if (policy === undefined) return
      const messages = state.mcpMessages
      if (messages === undefined) throw new Error('auth stage mcp-policy needs the messages; check the pipeline order')
      const scopes = state.scopes ?? NO_SCOPES
      for (const message of messages) {
        const judged = judge(policy, message)
        if (judged === undefined) continue
        const { what, requirement } = judged
        // the one rule of "may use" (mcp-calls/policy.ts): a list shows the caller only what passes it
        const missing = shortfall(requirement, scopes.set)
        if (missing === 'deny') {
          throw new GatewayError('MCP_CALL_DENIED', `This route lets no one use ${what} (its mcp policy says deny)`)
        }
        if (missing.length === 0) continue
        // the scopes to ask for: the route's and the call's, as a client stepping up needs them all (not deny: missing is a list)
        const wanted = [...new Set([...(state.requiredScopes ?? []), ...(requirement as readonly string[])])]
        const capitalised = what.charAt(0).toUpperCase() + what.slice(1)
        throw insufficientScope(wanted, missing, state.key, state.account?.scopes ?? scopes, capitalised)
      }
    }
  }
}
