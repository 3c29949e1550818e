// How backends read a path: routes match the raw path, case-sensitively and to the byte, but many
// backends fold case, take "/x" and "/x/" alike, or trim trailing dots and spaces from a segment.
// A path a weaker route takes may so be a stronger route's path to the backend (/V1/CLIENTS/42,
// /v1/clients, /v1/clients./42 beside a signed /v1/clients/): the route table refuses those
// (route-table.ts), using the normaliser here. Every backend decodes %XX, so the normaliser does
// too; encoded control characters, unreserved characters, "/" and "\" never get this far
// (requestTargetProblem).

export const PATH_NORMALISATIONS = ['case', 'slash', 'trim'] as const
export type PathNormalisation = typeof PATH_NORMALISATIONS[number]

/** What each normalisation is and the backends known to apply it (routes check prints these; docs/routes.md#path-aliases). */
export const NORMALISATION_BACKENDS: Record<PathNormalisation, { name: string; backends: string }> = {
  case: { name: 'case folding (/V1/Clients/42)', backends: 'Express (default), Koa router (default), ASP.NET Core, IIS' },
  slash: {
    name: 'a trailing slash added or dropped (/v1/clients)',
    backends: 'Express (non-strict routing, the default), Koa router (default), ASP.NET Core, Rails, Spring MVC 5 (trailing-slash match), ' +
      'Fastify with ignoreTrailingSlash'
  },
  trim: { name: 'trailing dots and spaces trimmed (/v1/clients./42)', backends: 'IIS, and any backend serving files from Windows' }
}

/** A set of normalisations as bits: cheap to compare and to key a cache by. */
export type NormalisationMask = number
const BIT: Record<PathNormalisation, number> = { case: 1, slash: 2, trim: 4 }
export const maskOf = (normalisations: readonly PathNormalisation[]): NormalisationMask =>
  normalisations.reduce((mask, n) => mask | BIT[n], 0)
export const hasNormalisation = (mask: NormalisationMask, n: PathNormalisation): boolean => (mask & BIT[n]) !== 0

const ESCAPE = /%([0-9A-Fa-f]{2})/g
const TRAILING_DOTS_AND_SPACES = /[. ]+$/
const UPPER = /[A-Z]+/g

/**
 * The path (no query) as a backend applying `mask` reads it: %XX decoded (byte by byte: two
 * spellings are one path exactly when their bytes are), then each segment's trailing dots and
 * spaces trimmed (a segment left empty is dropped, as Windows drops it), then ASCII case folded,
 * then a trailing slash dropped ("/" stays "/").
 */
export function normalisePath (path: string, mask: NormalisationMask): string {
  let normalised = path.includes('%') ? path.replace(ESCAPE, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))) : path
  if (hasNormalisation(mask, 'trim')) {
    const segments = normalised.split('/')
    const kept = [segments[0] as string]
    for (let i = 1; i < segments.length; i++) {
      const segment = (segments[i] as string).replace(TRAILING_DOTS_AND_SPACES, '')
      // the last segment stays even when empty: it is the trailing slash, which is "slash"'s call
      if (segment !== '' || i === segments.length - 1) kept.push(segment)
    }
    normalised = kept.join('/')
  }
  if (hasNormalisation(mask, 'case')) normalised = normalised.replace(UPPER, (letters) => letters.toLowerCase())
  if (hasNormalisation(mask, 'slash') && normalised.length > 1 && normalised.endsWith('/')) normalised = normalised.slice(0, -1)
  return normalised
}
