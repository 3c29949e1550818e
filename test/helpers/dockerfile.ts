// The Dockerfile read as Docker reads it, enough for tests: logical instructions (continuations
// joined, comments dropped), grouped by build stage.
import { cpSync, mkdirSync, readFileSync, statSync } from 'node:fs'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))

export interface Instruction { keyword: string, args: string }

export interface Stage {
  /** the FROM image */
  image: string
  /** the `AS name`, if any */
  name: string | undefined
  instructions: Instruction[]
  /** every instruction of `keyword` in this stage */
  all: (keyword: string) => Instruction[]
}

/** Dockerfile instructions with line continuations joined and comments dropped. */
export function dockerInstructions (text: string): Instruction[] {
  const logical: string[] = []
  let current = ''
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (current === '' && (line === '' || line.startsWith('#'))) continue
    if (line.startsWith('#')) continue
    if (line.endsWith('\\')) {
      current += line.slice(0, -1) + ' '
      continue
    }
    logical.push(current + line)
    current = ''
  }
  if (current.trim() !== '') logical.push(current)
  return logical.map((line) => {
    const match = /^(\S+)\s*(.*)$/.exec(line.trim())
    return { keyword: (match?.[1] ?? '').toUpperCase(), args: (match?.[2] ?? '').trim() }
  })
}

/** The repository's Dockerfile, stage by stage (the last one is the image). */
export function dockerStages (file = join(ROOT, 'Dockerfile')): Stage[] {
  const stages: Stage[] = []
  for (const instruction of dockerInstructions(readFileSync(file, 'utf8'))) {
    if (instruction.keyword === 'FROM') {
      const [image = '', as, name] = instruction.args.split(/\s+/)
      const instructions: Instruction[] = []
      stages.push({
        image,
        name: as?.toUpperCase() === 'AS' ? name : undefined,
        instructions,
        all: (keyword) => instructions.filter((i) => i.keyword === keyword)
      })
    } else {
      stages.at(-1)?.instructions.push(instruction)
    }
  }
  return stages
}

/** A COPY's flags (e.g. from: 'build'), sources and destination. */
export function copyOf (instruction: Instruction): { from: string | undefined; sources: string[]; destination: string } {
  const parts = instruction.args.split(/\s+/)
  const from = parts.find((p) => p.startsWith('--from='))?.slice('--from='.length)
  const paths = parts.filter((p) => !p.startsWith('--'))
  return { from, sources: paths.slice(0, -1), destination: paths.at(-1) ?? '' }
}

/** `CMD`/`command` in exec form as an argv, or undefined when it is not valid JSON. */
export function execForm (args: string | undefined): string[] | undefined {
  try {
    const argv: unknown = JSON.parse(args ?? '')
    return Array.isArray(argv) ? argv.map(String) : undefined
  } catch {
    return undefined
  }
}

/** A stage's WORKDIR, with a slash at its end: where its relative paths start. */
export function workdirOf (stage: Stage): string {
  return `${stage.all('WORKDIR').at(-1)?.args ?? '/'}/`.replace(/\/+$/, '/')
}

/**
 * Carries out a stage's COPY lines into `dir` (its WORKDIR), as docker build does: sources from
 * `context` (the checkout), and for --from=STAGE from that stage's folder in `stageDirs` (its files
 * at `dir`, its WORKDIR `workdir`).
 */
export function copyStage (stage: Stage, dir: string, stageDirs: Record<string, { dir: string; workdir: string }> = {}, context = ROOT): void {
  for (const instruction of stage.all('COPY')) {
    const { from, sources, destination } = copyOf(instruction)
    for (const source of sources) {
      const origin = from === undefined
        ? join(context, source)
        : join(stageDirs[from]?.dir ?? '/nonexistent', source.replace(stageDirs[from]?.workdir ?? '', ''))
      const target = join(dir, destination)
      if (statSync(origin).isDirectory()) {
        cpSync(origin, target, { recursive: true })
      } else {
        mkdirSync(target, { recursive: true })
        cpSync(origin, join(target, basename(origin)))
      }
    }
  }
}
