import type { FastifySchemaCompiler, FastifySchemaValidationError } from 'fastify'
import type { TSchema } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'
import { ValueErrorType, type ValueError } from '@sinclair/typebox/errors'
import { ProblemError, type FieldError } from './problem.js'

/*
 * Why not fastify's default ajv: it is configured with `removeAdditional: true`
 * (unknown body properties are silently dropped instead of rejected),
 * `coerceTypes` (`"tax_id": 12345` would become "12345") and `allErrors: false`
 * (only the first failing field is reported). We want the opposite on all
 * three, and TypeBox's compiler gives exactly that without extra dependencies:
 * it never mutates or coerces, and `Errors()` walks every failure.
 *
 * Query strings are therefore validated as the strings they are on the wire;
 * handlers convert them after validation.
 */

/**
 * Schemas may carry an `errorMessage` (ignored by TypeBox itself) so each field
 * reports one stable, human message instead of whichever keyword failed first.
 */
function messageFor (error: ValueError): string {
  switch (error.type) {
    case ValueErrorType.ObjectRequiredProperty:
      return 'is required'
    case ValueErrorType.ObjectAdditionalProperties:
      return 'is not an allowed property'
    default: {
      const custom: unknown = error.schema['errorMessage']
      return typeof custom === 'string' ? custom : error.message
    }
  }
}

export const typeBoxValidatorCompiler: FastifySchemaCompiler<TSchema> = ({ schema }) => {
  const check = TypeCompiler.Compile(schema)
  return (data: unknown) => {
    if (check.Check(data)) return true
    const error: FastifySchemaValidationError[] = [...check.Errors(data)].map((e) => ({
      keyword: ValueErrorType[e.type],
      instancePath: e.path,
      schemaPath: '',
      params: {},
      message: messageFor(e),
    }))
    return { error }
  }
}

/** Undo JSON Pointer escaping (RFC 6901) for one path segment. */
function unescapePointer (segment: string): string {
  return segment.replaceAll('~1', '/').replaceAll('~0', '~')
}

/**
 * Collapse validator output to one entry per top-level field, first message
 * wins (TypeBox reports "required" before the type error for the same field).
 * A failure of the whole part (e.g. the body is not an object) is reported
 * under the part's own name, such as `body`.
 */
export function toFieldErrors (
  validation: readonly FastifySchemaValidationError[],
  part: string
): FieldError[] {
  const byField = new Map<string, string>()
  for (const v of validation) {
    const first = v.instancePath.split('/')[1]
    const field = first === undefined || first === '' ? part : unescapePointer(first)
    if (!byField.has(field)) byField.set(field, v.message ?? 'is invalid')
  }
  return [...byField].map(([field, message]) => ({ field, message }))
}

/**
 * For checks a schema cannot express (a cursor we did not issue, a client_id
 * that is not the caller's): handlers collect them next to any schema errors
 * and fail once, so the caller still sees every failing field in one answer.
 */
export function throwIfFieldErrors (errors: readonly FieldError[], part: 'body' | 'query'): void {
  if (errors.length > 0) {
    throw new ProblemError('VALIDATION_FAILED', `The request ${part} is not valid.`, [...errors])
  }
}
