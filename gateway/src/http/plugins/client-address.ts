// The client's address, decided once per request before anything else reads it: request.ip is
// the socket's peer, unless that peer is one of KEYGATE_TRUSTED_PROXIES; then it is the address
// the trusted hops report (lib/client-address.ts has the rule). Everything that names the client
// (the login limits, the access log, X-Forwarded-For upstream) reads request.ip and nothing else.
//
// Not Fastify's own `trustProxy`: proxy-addr reads X-Forwarded-For only (no RFC 7239 Forwarded),
// takes an entry that is not an address (garbage a client put in the chain) for the client's
// address, and would also make request.host and request.protocol follow X-Forwarded-Host and
// -Proto.
import type { FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { ClientAddressConfig } from '../../config/trusted-proxies.js'
import { clientAddress, trustedProxies, type ProxyHop } from '../../lib/client-address.js'

declare module 'fastify' {
  interface FastifyRequest {
    /** the request came through a trusted proxy: the forwarding headers to pass on; null otherwise */
    proxyHop: ProxyHop | null
  }
}

const clientAddresses: FastifyPluginAsync<ClientAddressConfig> = async (app, options) => {
  app.decorateRequest('proxyHop', null)
  const proxies = trustedProxies(options.trustedProxies)
  // Without trusted proxies every peer is the client: Fastify's request.ip already says so, at no cost.
  if (proxies.entries.length === 0) return
  const { header } = options
  app.addHook('onRequest', (request, _reply, done) => {
    const peer = request.raw.socket?.remoteAddress
    const client = peer === undefined ? undefined : clientAddress(peer, request.headers, proxies, header)
    if (client?.hop !== undefined) {
      // Fastify's request.ip is a getter of the socket's address; this request's own value hides it.
      Object.defineProperty(request, 'ip', { value: client.ip, enumerable: true })
      request.proxyHop = client.hop
    }
    done()
  })
}

export const clientAddressPlugin = fp(clientAddresses, { name: 'keygate-client-address', fastify: '5.x' })
