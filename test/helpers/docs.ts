// What the docs say, for the tests that run it: a section of a page found by its heading, and the
// fenced code blocks in it. Tests name the page and the heading, never a line number or a copy of
// the text, so that when a section moves to another page only its page changes here.
import { execFileSync } from 'node:child_process'
import { readFileSync } from 'node:fs'

const ROOT = new URL('../../', import.meta.url)

/** A page of the docs, by its path from the repository root (README.md, docs/scaling.md, client/README.md). */
export function docPage (page: string): string {
  return readFileSync(new URL(page, ROOT), 'utf8')
}

/**
 * The section of `page` under the heading whose text is `heading` (any level), without the
 * heading line: up to the next heading of that level or above. Lines in fenced code blocks are
 * never headings (a shell comment starts with # too). Throws unless exactly one heading matches.
 */
export function docSection (page: string, heading: string): string {
  const lines = docPage(page).split('\n')
  let fence: string | undefined
  const headings: Array<{ index: number; level: number; text: string }> = []
  lines.forEach((line, index) => {
    const opening = /^(```+|~~~+)/.exec(line)?.[1]
    if (opening !== undefined) {
      if (fence === undefined) fence = opening
      else if (line.trim() === fence) fence = undefined
      return
    }
    const match = fence === undefined ? /^(#{1,6}) +(.*?) *#*$/.exec(line) : null
    if (match !== null) headings.push({ index, level: (match[1] as string).length, text: match[2] as string })
  })
  const found = headings.filter((h) => h.text === heading)
  if (found.length !== 1) throw new Error(`${page}: ${found.length} headings "${heading}" (expected one)`)
  const start = found[0] as { index: number; level: number }
  const end = headings.find((h) => h.index > start.index && h.level <= start.level)?.index ?? lines.length
  return lines.slice(start.index + 1, end).join('\n')
}

/** The fenced code blocks of language `lang` (```lang) in that section, in order, each without its fences. */
export function docBlocks (page: string, heading: string, lang: string): string[] {
  const section = docSection(page, heading)
  return [...section.matchAll(/^(```+)([^\n]*)\n([\s\S]*?)^\1[ \t]*$/gm)]
    .filter((m) => (m[2] as string).trim() === lang)
    .map((m) => m[3] as string)
}

/** The one block of `lang` in that section; throws when there is none or more than one. */
export function docSnippet (page: string, heading: string, lang: string): string {
  const blocks = docBlocks(page, heading, lang)
  if (blocks.length !== 1) throw new Error(`${page}, "${heading}": ${blocks.length} \`\`\`${lang} blocks (expected one)`)
  return blocks[0] as string
}

export interface DocBlock { page: string; heading: string; lang: string; text: string }

/**
 * Every fenced code block of `page`, with the text of the nearest heading above it ('' before the
 * first) and its language ('' when the fence names none).
 */
export function allDocBlocks (page: string): DocBlock[] {
  const blocks: DocBlock[] = []
  let fence: { marker: string; lang: string; lines: string[] } | undefined
  let heading = ''
  for (const line of docPage(page).split('\n')) {
    if (fence !== undefined) {
      if (line.trim() === fence.marker) {
        blocks.push({ page, heading, lang: fence.lang, text: fence.lines.map((l) => `${l}\n`).join('') })
        fence = undefined
      } else fence.lines.push(line)
      continue
    }
    const opening = /^(```+|~~~+)(.*)$/.exec(line)
    if (opening !== null) { fence = { marker: opening[1] as string, lang: (opening[2] as string).trim(), lines: [] }; continue }
    const match = /^#{1,6} +(.*?) *#*$/.exec(line)
    if (match !== null) heading = match[1] as string
  }
  return blocks
}

/**
 * The variables a block of settings (`NAME=value` lines, shell comments allowed) sets, as bash
 * reads it: only the names the block assigns, nothing of the environment bash runs in.
 */
export function blockSettings (block: string): Record<string, string> {
  const names = [...block.matchAll(/^(?:export +)?([A-Z_][A-Z0-9_]*)=/gm)].map((m) => m[1] as string)
  const out = execFileSync('bash', ['-c', `set -a\n${block}\nenv -0`], { env: { PATH: process.env.PATH ?? '' } }).toString()
  const all = Object.fromEntries(out.split('\0').filter(Boolean).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]))
  return Object.fromEntries(names.map((name) => [name, all[name] ?? '']))
}
