// RFC 9728 Protected Resource Metadata: GET /.well-known/oauth-protected-resource followed by a
// resource's path, on the public listener and on the decision listener (a proxy in decision mode
// sends these paths to keygate). Everything in it comes from the configuration in force: the
// route file's resources and routes, the issuers file's issuers; nothing from the request.
import { Type } from '@sinclair/typebox'
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import { pathOf } from '#client/protocol'
import { GatewayError } from '../../errors.js'
import type { IssuerConfig } from '../../idp/issuers.js'
import { resourceMetadata, type ResourceMetadata } from '../../resources/metadata.js'
import { METADATA_MAX_AGE_SECONDS, METADATA_PATH, resourcesOf } from '../../resources/resource.js'
import type { RouteConfig } from '../../proxy/route.js'

export interface ResourceMetadataOptions {
  /** the routes in force */
  routes: () => readonly RouteConfig[]
  /** the issuers in force */
  issuers: () => readonly IssuerConfig[]
  /** the algorithms DPoP proofs may use (RFC 9449; dpop/proof.ts): dpop_signing_alg_values_supported */
  dpopAlgorithms?: readonly string[] | undefined
}

const Metadata = Type.Object({
  resource: Type.String(),
  authorization_servers: Type.Array(Type.String()),
  scopes_supported: Type.Array(Type.String()),
  bearer_methods_supported: Type.Array(Type.String()),
  resource_name: Type.String(),
  resource_documentation: Type.Optional(Type.String()),
  dpop_signing_alg_values_supported: Type.Optional(Type.Array(Type.String())),
  dpop_bound_access_tokens_required: Type.Optional(Type.Boolean())
})

export const resourceMetadataRoutes: FastifyPluginAsync<ResourceMetadataOptions> = async (app, { routes, issuers, dpopAlgorithms }) => {
  const answer = async (request: FastifyRequest, reply: FastifyReply): Promise<ResourceMetadata> => {
    const path = pathOf(request.url)
    const inForce = routes()
    const resource = resourcesOf(inForce).find((r) => r.metadataPath === path)
    if (resource === undefined) throw new GatewayError('NOT_FOUND', `No protected resource has its metadata at ${path}`)
    // the configuration may change on a reload: a client keeps it a few minutes
    reply.header('cache-control', `public, max-age=${METADATA_MAX_AGE_SECONDS}`)
    // public and credential-free: a client in a browser (an MCP inspector) may read it from any origin
    reply.header('access-control-allow-origin', '*')
    return resourceMetadata(resource, inForce, issuers(), dpopAlgorithms)
  }
  const schema = {
    summary: 'A protected resource\'s metadata (RFC 9728): its authorization servers and scopes',
    description: 'The path is /.well-known/oauth-protected-resource followed by the resource identifier\'s path (docs/resource-server.md).',
    tags: ['operations'],
    response: { 200: Metadata }
  }
  app.get(METADATA_PATH, { schema }, answer)
  app.get(`${METADATA_PATH}/*`, { schema: { ...schema, hide: true } }, answer)
}
