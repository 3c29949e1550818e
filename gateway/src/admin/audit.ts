// The audit trail of the admin API: every request to a route that changes something (a route whose
// config names an `audit` action) writes exactly one log line once it is answered, whatever the
// outcome: who ("admin": whoever holds KEYGATE_ADMIN_TOKEN), what, on which user or key, the
// outcome, and the caller's address. The handler states the outcome (`request.auditOutcome`);
// a refusal states its error code. Never a password, a token or a request body.
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'

export type AuditAction = 'user.put' | 'user.delete' | 'key.update' | 'key.revoke' | 'routes.reload' | 'config.reload'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** the admin API's audit action of this route: set on every route that changes something */
    audit?: AuditAction
  }
  interface FastifyRequest {
    /** what the change did (`created`, `revoked`, ...), with details worth keeping (counts, apiKeys) */
    auditOutcome: AuditOutcome | null
  }
}

export interface AuditOutcome {
  outcome: string
  [detail: string]: unknown
}

/** One audit line's `audit` member. */
export interface AuditRecord {
  who: 'admin'
  action: AuditAction
  user?: string
  apiKey?: string
  outcome: string
  status: number
  ip: string
  reqId: string
  [detail: string]: unknown
}

const audit: FastifyPluginAsync = async (app) => {
  app.decorateRequest('auditOutcome', null)
  app.addHook('onResponse', async (request, reply) => {
    const action = request.routeOptions.config.audit
    if (action === undefined) return
    const params = (request.params ?? {}) as { name?: string; apiKey?: string }
    const { outcome, ...details } = request.auditOutcome ?? { outcome: undefined }
    const record: AuditRecord = {
      who: 'admin',
      action,
      ...(params.name !== undefined && { user: params.name }),
      ...(params.apiKey !== undefined && { apiKey: params.apiKey }),
      ...details,
      // a refusal (a bad password, no such user, a bad route file) is its error code
      outcome: outcome ?? request.denialReason ?? `status ${reply.statusCode}`,
      status: reply.statusCode,
      ip: request.ip,
      reqId: request.id
    }
    request.log.info({ audit: record }, `admin audit: ${action} ${record.apiKey ?? record.user ?? ''} ${record.outcome}`.replace('  ', ' '))
  })
}

export const auditPlugin = fp(audit, { name: 'keygate-admin-audit', fastify: '5.x', dependencies: ['keygate-problems'] })
