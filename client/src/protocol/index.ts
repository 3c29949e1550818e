// The protocol core: the rules a request must follow to pass keygate, shared by the gateway (which
// enforces them) and the client (which follows them). No dependencies and no runtime-specific
// imports (no node:, no Buffer), so that, compiled, the same code runs in Node, Deno, Bun and
// browsers.
export { API_KEY_PATTERN, apiKeyOfSpki } from './api-key.js'
export {
  ALGORITHMS_OF_KEY_TYPE, ComponentError, CONTENT_DIGEST_ALGORITHMS, contentDigestValue, FORWARDED_DIGEST_HEADER, KEY_TYPES, MESSAGE_SIGNATURE_ALGORITHMS,
  normaliseAuthority,
  repeatedComponent, requestComponentValue, serializeComponentId, serializeParameters, serializeSignatureParams, signatureBase,
  type ComponentId, type ContentDigestAlgorithm, type KeyType, type MessageSignatureAlgorithm, type Parameters, type ParameterValue, type SignedMessage
} from './message-signature.js'
export {
  BODY_OPTIONAL_METHODS, BODYLESS_METHODS, bodylessMethodProblem, HTTP_METHODS, METHOD_TOKEN, NO_BODY_METHODS, SAFE_METHODS, signedBodyMethodProblem,
  type HttpMethod
} from './methods.js'
export { pathOf, requestTargetProblem, TARGET_CHARACTER } from './request-target.js'
export {
  describeSigningString, isTargetByte, SEED_BODY_BOUNDARIES, seedBodyProblem, signingString, type SeedBodyBoundary, type Sha256Hex, type Sha256HexAsync,
  type SigningStringDetails
} from './signing-string.js'
export { looksLikeSeconds, MAX_TIMESTAMP_SKEW_MS, MILLISECONDS_TIMESTAMP } from './timestamp.js'
