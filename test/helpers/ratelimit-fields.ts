// The RateLimit-Policy and RateLimit fields of an answer, parsed as the Structured Field Lists
// they must be (RFC 9651, with the structured-headers package: not keygate's own code), each item
// a String naming its policy, with integer parameters.
import { parseList } from 'structured-headers'

export interface RateLimitFields {
  /** RateLimit-Policy: policy name -> its quota (q) and window (w, seconds) */
  policies: Map<string, { q: number; w: number }>
  /** RateLimit: policy name -> requests remaining (r) and seconds to reset (t) */
  limits: Map<string, { r: number; t: number }>
}

function items (field: string | string[] | undefined, names: [string, string]): Map<string, Record<string, number>> {
  const out = new Map<string, Record<string, number>>()
  if (field === undefined) return out
  for (const member of parseList(Array.isArray(field) ? field.join(', ') : field)) {
    const [value, params] = member
    if (typeof value !== 'string') throw new Error(`a RateLimit item that is not a String: ${JSON.stringify(value)}`)
    const fields: Record<string, number> = {}
    for (const name of names) {
      const param = params.get(name)
      if (typeof param !== 'number' || !Number.isInteger(param) || param < 0) throw new Error(`${value}: ${name} is not a non-negative Integer`)
      fields[name] = param
    }
    out.set(value, fields)
  }
  return out
}

/** Throws when either field is not a well-formed list of such items. */
export function rateLimitFields (headers: Record<string, string | string[] | undefined>): RateLimitFields {
  return {
    policies: items(headers['ratelimit-policy'], ['q', 'w']) as RateLimitFields['policies'],
    limits: items(headers.ratelimit, ['r', 't']) as RateLimitFields['limits']
  }
}
