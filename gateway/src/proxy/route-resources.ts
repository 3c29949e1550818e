// The route file's resources (RFC 9728 protected resources, docs/resource-server.md): each entry
// checked and made a ProtectedResource, and the rules that tie routes to them: a route names a
// resource the file has, on a tier that takes a bearer token; every resource has a route; two
// resources never share a metadata path. Their issuers are checked against the issuers file
// where both are known (resources/resource.ts resourceIssuerProblems).
import { protectedResource, resourceIdProblem, type ProtectedResource } from '../resources/resource.js'
import type { Problem, ResourceEntry, RouteEntry } from './route-file-schema.js'

/** The file's resources by id; a problem for each entry that cannot be one. */
export function resourcesFromEntries (entries: readonly ResourceEntry[], problems: Problem[]): Map<string, ProtectedResource> {
  const resources = new Map<string, ProtectedResource>()
  const byPath = new Map<string, string>()
  entries.forEach((entry, i) => {
    const at = `resources[${i}]`
    const idProblem = resourceIdProblem(entry.id)
    if (idProblem !== undefined) {
      problems.push({ route: -1, text: `${at}.id: ${JSON.stringify(entry.id)} ${idProblem}` })
      return
    }
    if (entry.documentation !== undefined && !/^https?:\/\/[^\s]+$/.test(entry.documentation)) {
      problems.push({ route: -1, text: `${at}.documentation: ${JSON.stringify(entry.documentation)} is not an http(s) URL` })
    }
    if (resources.has(entry.id)) {
      problems.push({ route: -1, text: `${at}.id: ${JSON.stringify(entry.id)} is already a resource; give each resource one entry` })
      return
    }
    const resource = protectedResource(entry)
    const other = byPath.get(resource.metadataPath)
    if (other !== undefined) {
      problems.push({
        route: -1,
        text: `${at}.id: ${JSON.stringify(entry.id)} has the path of ${JSON.stringify(other)}, so both would have their metadata at ` +
          `${resource.metadataPath} (keygate answers by path, never by Host); give each resource its own path`
      })
      return
    }
    byPath.set(resource.metadataPath, entry.id)
    resources.set(entry.id, resource)
  })
  return resources
}

/** The resource a route entry names (undefined: none, or a problem said why). */
export function routeResource (entry: RouteEntry, index: number, resources: ReadonlyMap<string, ProtectedResource>,
  problems: Problem[]): ProtectedResource | undefined {
  if (entry.resource === undefined) return undefined
  const at = `routes[${index}].resource`
  const resource = resources.get(entry.resource)
  if (resource === undefined) {
    const known = [...resources.keys()]
    problems.push({
      route: index,
      text: `${at}: ${JSON.stringify(entry.resource)} is not one of the file's resources ` +
        `(${known.length === 0 ? 'it has none: list them under resources' : `known: ${known.join(', ')}`})`
    })
    return undefined
  }
  if (entry.auth !== 'bearer' && entry.auth !== 'signed') {
    problems.push({ route: index, text: `${at}: a resource's routes take bearer tokens; give it auth: bearer or signed, or drop resource` })
  }
  return resource
}

/** A resource no route names protects nothing, and its metadata would list no scopes: a mistake. */
export function unusedResourceProblems (resources: ReadonlyMap<string, ProtectedResource>, entries: readonly RouteEntry[]): Problem[] {
  const named = new Set(entries.map((entry) => entry.resource))
  return [...resources.keys()].filter((id) => !named.has(id)).map((id) => ({
    route: -1,
    text: `resources: ${JSON.stringify(id)} is named by no route; give its routes resource: ${id}, or drop it`
  }))
}
