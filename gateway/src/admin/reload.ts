// The admin API's reload of every file keygate re-reads without a restart (proxy/config-reload.ts,
// docs/routes.md#reloading): the route, issuers and agents files, all or nothing, as SIGHUP does,
// with an answer. A file with mistakes refuses the whole reload (422 CONFIG_FILE_INVALID, every
// mistake of every file listed) and every file in force stays.
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { GatewayError } from '../errors.js'
import type { ConfigReload, FileChanges } from '../proxy/config-reload.js'
import { FilesReloaded } from './schemas/reload.js'

/** A reload of every file: one gateway's (its reloader), or every worker's (process/worker-requests.ts). */
export interface FilesReload {
  reload: () => Promise<ConfigReload & { workers?: number }>
}

export const adminReloadRoutes: FastifyPluginAsyncTypebox<{ files: FilesReload }> = async (app, { files }) => {
  app.post('/v1/reload', {
    config: { audit: 'config.reload', problems: ['CONFIG_FILE_INVALID'] },
    schema: {
      summary: 'Re-read the route, issuers and agents files',
      description: 'As SIGHUP does, and with an answer: all three files read and checked, then put in force together; what changed in each. ' +
        'A file with mistakes refuses the whole reload (every mistake listed) and every file in force stays. A removed issuer\'s tokens ' +
        'are refused from the answer on. With KEYGATE_WORKERS, every worker reloads before the answer.',
      tags: ['routes'],
      response: { 200: FilesReloaded }
    }
  }, async (request) => {
    const result = await files.reload()
    if (result.outcome === 'invalid') {
      request.auditOutcome = { outcome: 'invalid', files: result.files, problems: result.problems.length }
      throw new GatewayError('CONFIG_FILE_INVALID', `${result.files.join(', ')} refused (${result.problems.length} ` +
        `mistake${result.problems.length === 1 ? '' : 's'}); every file in force stays: ${result.problems.join('; ')}`, {
        extra: { files: result.files, problems: result.problems }
      })
    }
    const { routes, issuers, agents, workers } = result
    const counts = (c: FileChanges): Record<string, number> => ({ added: c.added.length, removed: c.removed.length, changed: c.changed.length })
    request.auditOutcome = { outcome: 'reloaded', routes: counts(routes), issuers: counts(issuers), agents: counts(agents) }
    return { routes, issuers, agents, ...(workers !== undefined && { workers }) }
  })
}
