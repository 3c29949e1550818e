// What the browser signed, and on a refused signature keygate's diagnosis beside it: the members
// of keygate's INVALID_SIGNATURE answer that differ from what was signed (signatureMismatches, or
// for RFC 9421 the signature base lines: signatureBaseMismatches), as the CLI's `call` explains it.
import { type SignatureBaseDetails, signatureBaseMismatches, signatureMismatches, type SigningStringDetails } from '@keygate/client'
import { h } from './dom.js'

export type Signed =
  | { scheme: 'seed'; details: SigningStringDetails; apiKey: string }
  | { scheme: 'rfc9421'; details: SignatureBaseDetails; apiKey: string }

const SEED_PARTS: ReadonlyArray<[keyof SigningStringDetails, string]> = [
  ['timestamp', 'Timestamp'],
  ['method', 'Method'],
  ['target', 'Target'],
  ['bodyLength', 'Body length (bytes)'],
  ['bodySha256', 'Body SHA-256'],
  ['signingStringLength', 'Signing string length (bytes)'],
  ['signingStringSha256', 'Signing string SHA-256']
]

/** The signed bytes, described: the signing string's parts, or the signature base's lines. */
export function signedView (signed: Signed): HTMLElement {
  if (signed.scheme === 'rfc9421') {
    return h('div', {},
      h('p', {}, 'The RFC 9421 signature base, line by line, and its SHA-256:'),
      h('pre', { class: 'code', tabindex: 0, 'aria-label': 'Signature base signed' }, h('code', {}, signed.details.signatureBase.join('\n'))),
      h('p', {}, 'SHA-256: ', h('code', { class: 'hash' }, signed.details.signatureBaseSha256)))
  }
  const { details } = signed
  return h('dl', { class: 'facts' }, SEED_PARTS.map(([part, label]) => [h('dt', {}, label), h('dd', {}, h('code', { class: 'hash' }, String(details[part])))]))
}

function seedDiagnosis (mine: SigningStringDetails, problem: Record<string, unknown>, apiKey: string): HTMLElement[] {
  const differ = signatureMismatches(mine, problem)
  return [
    h('p', { class: 'verdict' }, differ.length === 0
      ? `keygate verified the very signing string this browser signed: the key registered as ${apiKey} is not the one that signed.`
      : `keygate verified another signing string than this browser signed; differing: ${differ.join(', ')}. ` +
        'Something between this browser and keygate changed the request.'),
    h('div', { class: 'table-wrap' }, h('table', { class: 'diagnosis' },
      h('caption', {}, 'The signing string: what this browser signed and what keygate verified'),
      h('thead', {}, h('tr', {},
        h('th', { scope: 'col' }, 'Part'), h('th', { scope: 'col' }, 'This browser signed'), h('th', { scope: 'col' }, 'keygate verified'),
        h('th', { scope: 'col' }, 'Same?'))),
      h('tbody', {}, SEED_PARTS.map(([part, label]) => {
        const differs = (differ as string[]).includes(part)
        return h('tr', { class: differs ? 'differs' : undefined },
          h('th', { scope: 'row' }, label),
          h('td', {}, h('code', { class: 'hash' }, String(mine[part]))),
          h('td', {}, h('code', { class: 'hash' }, problem[part] === undefined ? '(not given)' : String(problem[part]))),
          h('td', {}, differs ? 'differs' : 'same'))
      }))))
  ]
}

function baseLines (title: string, lines: string[], differing: string[]): HTMLElement {
  return h('div', { class: 'base' },
    h('h4', {}, title),
    h('ol', { class: 'lines' }, lines.map((line) => differing.includes(line)
      ? h('li', { class: 'differs' }, h('mark', {}, h('span', { class: 'visually-hidden' }, 'differs: '), h('code', {}, line)))
      : h('li', {}, h('code', {}, line)))))
}

function baseDiagnosis (mine: SignatureBaseDetails, problem: Record<string, unknown>): HTMLElement[] {
  const theirs = Array.isArray(problem.signatureBase) ? problem.signatureBase.filter((line): line is string => typeof line === 'string') : []
  const differ = signatureBaseMismatches(mine, problem)
  const same = differ.mine.length === 0 && differ.keygate.length === 0
  return [
    h('p', { class: 'verdict' }, same
      ? 'keygate verified the very signature base this browser signed: the key named by keyid is not the one that signed.'
      : `keygate verified another signature base than this browser signed: ${differ.mine.length + differ.keygate.length} lines differ (marked). ` +
        'Something between this browser and keygate changed the request.'),
    h('p', {}, 'SHA-256 signed: ', h('code', { class: 'hash' }, mine.signatureBaseSha256)),
    h('p', {}, 'SHA-256 verified: ',
      h('code', { class: 'hash' }, typeof problem.signatureBaseSha256 === 'string' ? problem.signatureBaseSha256 : '(not given)')),
    h('div', { class: 'bases' },
      baseLines('Signature base this browser signed', mine.signatureBase, differ.mine),
      baseLines('Signature base keygate verified', theirs, differ.keygate))
  ]
}

/** keygate's INVALID_SIGNATURE answer beside what was signed; undefined for any other answer. */
export function diagnosisView (problem: Record<string, unknown>, signed: Signed): HTMLElement | undefined {
  if (problem.code !== 'INVALID_SIGNATURE') return undefined
  if (signed.scheme === 'rfc9421') {
    if (problem.signatureBase === undefined && problem.signatureBaseSha256 === undefined) return undefined
    return h('section', { class: 'card diagnosis', 'aria-labelledby': 'diagnosis-heading' }, h('h3', { id: 'diagnosis-heading' }, 'Diagnosis'),
      baseDiagnosis(signed.details, problem))
  }
  return h('section', { class: 'card diagnosis', 'aria-labelledby': 'diagnosis-heading' }, h('h3', { id: 'diagnosis-heading' }, 'Diagnosis'),
    seedDiagnosis(signed.details, problem, signed.apiKey))
}
