// The files an operator writes beside the environment (the issuers file, the agents file): read as
// YAML or JSON (one parser: JSON is YAML), a key written twice refused, and checked against their
// TypeBox schema with every mistake named by its field, as `issuers[0].audiences`. The route file
// (proxy/route-file.ts) has its own reader: it also reloads, and names problems per route.
import { readFile } from 'node:fs/promises'
import { basename } from 'node:path'
import type { TSchema } from '@sinclair/typebox'
import { Value, type ValueError } from '@sinclair/typebox/value'
import { parse as parseYaml } from 'yaml'

/** problems named past this are left out: the first ones are what to fix */
const MAX_PROBLEMS = 20

/**
 * The file's parsed document. `fail(where, problem)` makes the error: where is the path when the
 * file cannot be read, its name when it cannot be parsed.
 */
export async function readDocumentFile (path: string, fail: (where: string, problem: string) => Error): Promise<unknown> {
  let text: string
  try {
    text = await readFile(path, 'utf8')
  } catch (err) {
    throw fail(path, `cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
  }
  try {
    return parseYaml(text, { uniqueKeys: true, prettyErrors: true })
  } catch (err) {
    throw fail(basename(path), `cannot be parsed: ${((err as Error).message.split('\n')[0] ?? '').replace(/:$/, '')}`)
  }
}

/** What is wrong with `document` against `schema`, each as "field: rule" (the schema's description, else TypeBox's message; `more` adds to it). */
export function schemaProblems (schema: TSchema, document: unknown, more: (error: ValueError) => string = () => ''): string[] {
  const problems: string[] = []
  for (const error of Value.Errors(schema, document)) {
    const field = error.path === '' ? 'the file' : error.path.slice(1).replaceAll('/', '.').replace(/\.(\d+)(?=\.|$)/g, '[$1]')
    problems.push(`${field}: ${(error.schema.description as string | undefined) ?? error.message}${more(error)}`)
    if (problems.length >= MAX_PROBLEMS) break
  }
  return problems
}
