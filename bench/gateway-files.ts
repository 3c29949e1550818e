// The files the gateways started here are given: route files (f: a rate limit; e: a public route;
// j: an agent route; k: a public MCP route; l, m, n: a bearer route) and j's agents file. Each in a temp dir of its own, removed when the run ends.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { onCleanup } from './cleanup.js'
import { CLIENTS_PATH, MCP_PATH } from './scenarios.js'
import { agentPublicJwk, BENCH_AGENT_ORIGIN, type BenchKey } from './signing.js'

/** (f): the built-in routes, signed, each with one per-key rate limit too high ever to refuse. */
export function limitedRouteFile (upstream: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-routes-'))
  onCleanup(async () => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'routes.json')
  writeFileSync(file, JSON.stringify({
    routes: ['/v1/clients/', '/v1/transactions/'].map((prefix) => ({
      prefix, upstream, auth: 'signed', methods: ['GET', 'POST'], rateLimits: [{ by: 'key', limit: 1_000_000_000, window: '1m' }]
    }))
  }))
  return file
}

/**
 * (k): the policy of the MCP route, as a GitHub-like MCP server's would be: every call the
 * scenario sends takes a glob (search_*) or an exact name; writes and deletes are denied, and so
 * is any tool not listed. A public route has no scopes to ask for: [] (the route's scopes
 * suffice, none here) or deny, judged all the same.
 */
const MCP_POLICY = {
  tools: { 'search_*': [], get_issue: [], list_issues: [], 'create_*': 'deny', 'update_*': 'deny', 'delete_*': 'deny', merge_pull_request: 'deny' },
  resources: { 'repo://*': [] },
  default: 'deny'
}

/**
 * (e): the business paths as a public route. The service still wants to know who calls: the
 * route adds the identity header the signed routes would (keygate drops any a client sends).
 * With `mcp` (--scenario mcp): the MCP path too, a public route to the bench's MCP server (e),
 * or a public MCP route with MCP_POLICY (k).
 */
export function publicRouteFile (upstream: string, mcp?: { upstream: string; policy: boolean }): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-routes-'))
  onCleanup(async () => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'routes.json')
  const addHeaders = { 'x-gateway-user': 'bench-public' }
  const routes: unknown[] = ['/v1/clients/', '/v1/transactions/'].map((prefix) => ({ prefix, upstream, auth: 'public', methods: ['GET', 'POST'], addHeaders }))
  if (mcp !== undefined) {
    routes.push({ path: MCP_PATH, upstream: mcp.upstream, auth: 'public', methods: ['POST'], addHeaders, ...(mcp.policy && { mcp: MCP_POLICY }) })
  }
  writeFileSync(file, JSON.stringify({ routes }))
  return file
}

/**
 * (l, m, n: --scenario dpop): /v1/clients/ a bearer route (a token, no signature), DPoP allowed
 * (the default): a bound token needs its proof, an unbound one passes as Bearer.
 */
export function bearerRouteFile (upstream: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-routes-'))
  onCleanup(async () => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'routes.json')
  writeFileSync(file, JSON.stringify({ routes: [{ prefix: CLIENTS_PATH, upstream, auth: 'bearer', methods: ['GET'] }] }))
  return file
}

/**
 * (j): the business paths as an agent route that lets in the bench's agent alone. The service
 * wants to know who calls: the route adds the identity header (an agent route has no user).
 */
export function agentRouteFile (upstream: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-routes-'))
  onCleanup(async () => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'routes.json')
  writeFileSync(file, JSON.stringify({
    routes: [{
      prefix: CLIENTS_PATH, upstream, auth: 'agent', agents: [BENCH_AGENT_ORIGIN], methods: ['GET'], addHeaders: { 'x-gateway-user': 'bench-agent' }
    }]
  }))
  return file
}

/**
 * (j): the agents file (KEYGATE_AGENT_DIRECTORIES) pinning the agent's directory with its one key:
 * keygate never fetches it, and holds it from the start, as it holds a directory it fetched.
 */
export function agentsFile (key: BenchKey): string {
  const dir = mkdtempSync(join(tmpdir(), 'keygate-bench-agents-'))
  onCleanup(async () => { rmSync(dir, { recursive: true, force: true }) })
  const file = join(dir, 'agents.json')
  writeFileSync(file, JSON.stringify({ directories: [{ origin: BENCH_AGENT_ORIGIN, keys: [agentPublicJwk(key)] }] }))
  return file
}
