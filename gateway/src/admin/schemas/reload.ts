// The admin API's reload of every file (POST /v1/reload): what it changed, per file (TypeBox; the OpenAPI document is made from these).
import { Type } from '@sinclair/typebox'

const names = (what: string) => Type.Array(Type.String(), { description: what })

const FileChanges = (file: string, by: string) => Type.Object({
  file: Type.Union([Type.String(), Type.Null()], { description: `${file}; null: none is set, nothing to reload` }),
  added: names(`the ${by} the file now has and did not`),
  removed: names(`the ${by} it no longer has: no longer in force`),
  changed: names(`the ${by} whose entry changed`)
})

export const FilesReloaded = Type.Object({
  routes: FileChanges('KEYGATE_ROUTES', 'route names'),
  issuers: FileChanges('KEYGATE_ISSUERS', 'issuer names'),
  agents: FileChanges('KEYGATE_AGENT_DIRECTORIES', 'directory origins'),
  workers: Type.Optional(Type.Integer({ description: 'with KEYGATE_WORKERS: how many worker processes reloaded' }))
})
