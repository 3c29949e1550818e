// The user API's GET /v1/routes: the routes the caller's scopes allow, as a client developer
// calls them (proxy/route-offer.ts), a page at a time (TypeBox; the OpenAPI document is made from these).
import { Type } from '@sinclair/typebox'
import { PageOf } from './paging.js'

export const OfferedRoute = Type.Object({
  name: Type.String({ description: 'the route\'s name, as errors, RateLimit-Policy and the usage read-outs name it' }),
  prefix: Type.Optional(Type.String({ description: 'the route takes every path that starts with this (absent when it takes one `path`)' })),
  path: Type.Optional(Type.String({ description: 'the one exact path the route takes (absent when it takes a `prefix`)' })),
  methods: Type.Array(Type.String()),
  tier: Type.Union([Type.Literal('signed'), Type.Literal('bearer'), Type.Literal('agent'), Type.Literal('public')], {
    description: 'signed: bearer token and a signature by one of your keys; bearer: the token only; ' +
      'agent: a signed agent\'s Web Bot Auth signature (no token); public: no credentials'
  }),
  scopes: Type.Array(Type.String(), { description: 'the scopes a request must have, all of them (signed: the key\'s, that its user still has)' }),
  signature: Type.Optional(Type.Array(Type.Union([Type.Literal('seed'), Type.Literal('rfc9421')]), {
    description: 'signed routes: the signature schemes taken (seed: X-API-Key, X-API-Timestamp, X-API-Signature; rfc9421: Signature-Input and Signature)'
  })),
  signatureLabel: Type.Optional(Type.String({ description: 'signed routes taking RFC 9421: the one signature label verified (absent: any label)' })),
  rateLimits: Type.Array(Type.Object({
    by: Type.Union([Type.Literal('key'), Type.Literal('user'), Type.Literal('agent'), Type.Literal('address')], {
      description: 'what the limit counts per (agent: the signed agent, by its directory origin)'
    }),
    limit: Type.Integer({ description: 'requests per window' }),
    window: Type.String({ description: '10s, 1m, 30d, ...' }),
    policy: Type.String({ description: 'its name in RateLimit-Policy, 429 answers and the usage read-outs' })
  }), { description: 'every one applies; empty: the route is not limited' })
})

export const OfferedRouteList = PageOf(OfferedRoute, 'in route-file order')
