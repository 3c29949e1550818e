import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import type { Test } from 'tap'
import { buildUpstreamApp, type UpstreamAppOptions } from '../../upstream-stub/src/app.js'
import type { ProblemBody } from '../../upstream-stub/src/problem.js'
import type { Client } from '../../upstream-stub/src/store.js'
import type { Transaction } from '../../upstream-stub/src/transaction-store.js'

export const COLLECTION = '/v1/clients/'
export const TRANSACTIONS = '/v1/transactions/'

export interface ApiPage<T> {
  items: T[]
  next_cursor: string | null
}

export type ClientPage = ApiPage<Client>
export type TransactionPage = ApiPage<Transaction>

/** A fresh app per test, closed when the test ends. */
export async function build (t: Test, opts: UpstreamAppOptions = {}): Promise<FastifyInstance> {
  const app = await buildUpstreamApp(opts)
  t.teardown(() => app.close())
  return app
}

export function as (user: string): Record<string, string> {
  return { 'x-gateway-user': user }
}

let taxIdCounter = 10_000_000

/** A valid create body; each call gets a distinct tax_id. */
export function validClient (overrides: Record<string, unknown> = {}): Record<string, unknown> {
  taxIdCounter += 1
  return { name: 'Ada Lovelace', email: 'ada@example.com', tax_id: String(taxIdCounter), ...overrides }
}

export async function create (
  t: Test,
  app: FastifyInstance,
  user: string,
  body: Record<string, unknown> = validClient()
): Promise<Client> {
  const res = await app.inject({ method: 'POST', url: COLLECTION, headers: as(user), payload: body })
  t.equal(res.statusCode, 201, `create for ${user}`)
  return res.json<Client>()
}

export async function list (
  t: Test,
  app: FastifyInstance,
  user: string,
  query: Record<string, string> = {}
): Promise<ClientPage> {
  const res = await app.inject({ method: 'GET', url: COLLECTION, headers: as(user), query })
  t.equal(res.statusCode, 200, `list for ${user}`)
  return res.json<ClientPage>()
}

/** A valid transaction body for this client. */
export function validTransaction (clientId: string, overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return { client_id: clientId, amount: '10.50', currency: 'EUR', ...overrides }
}

export async function createTransaction (
  t: Test,
  app: FastifyInstance,
  user: string,
  body: Record<string, unknown>
): Promise<Transaction> {
  const res = await app.inject({ method: 'POST', url: TRANSACTIONS, headers: as(user), payload: body })
  t.equal(res.statusCode, 201, `create transaction for ${user}`)
  return res.json<Transaction>()
}

export async function listTransactions (
  t: Test,
  app: FastifyInstance,
  user: string,
  query: Record<string, string> = {}
): Promise<TransactionPage> {
  const res = await app.inject({ method: 'GET', url: TRANSACTIONS, headers: as(user), query })
  t.equal(res.statusCode, 200, `list transactions for ${user}`)
  return res.json<TransactionPage>()
}

/** Asserts the response is problem+json with this status and code, and returns the body. */
export function expectProblem (
  t: Test,
  res: LightMyRequestResponse,
  status: number,
  code: ProblemBody['code']
): ProblemBody {
  t.equal(res.statusCode, status, 'status')
  t.match(res.headers['content-type'], /^application\/problem\+json\b/, 'content-type')
  const body = res.json<ProblemBody>()
  t.equal(body.code, code, 'code')
  t.equal(body.status, status, 'status in body')
  t.equal(body.type, `urn:keygate:problem:${code.toLowerCase().replaceAll('_', '-')}`, 'type')
  t.type(body.title, 'string')
  t.type(body.detail, 'string')
  return body
}

/** The `errors[].field` names, sorted, for order-independent comparison. */
export function fieldsOf (problem: ProblemBody): string[] {
  return (problem.errors ?? []).map((e) => e.field).sort()
}
