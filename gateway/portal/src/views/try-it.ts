// #/try: one request to a route the user may call (GET /v1/routes), signed here with a key this
// browser holds (either scheme, by @keygate/client's signRequest), sent with the bearer token; then
// keygate's answer, its diagnosis of a refused signature beside what was signed, and the request
// as snippets to run elsewhere.
import {
  describeSignatureBase, describeSigningString, KeygateResponseError, type MessageSignatureAlgorithm, signRequest, SigningInputError
} from '@keygate/client'
import { ALGORITHMS_OF_KEY_TYPE } from '@keygate/client/protocol'
import { copyable } from '../copy.js'
import { diagnosisView, type Signed, signedView } from '../diagnosis.js'
import { field, h, replace, uid } from '../dom.js'
import { allKeys, allRoutes, type KeyView, type OfferedRoute, routePath } from '../keygate-api.js'
import { KEY_TYPE_NAMES } from '../key-maker.js'
import { type HeldKey, heldKeys } from '../key-store.js'
import { revokeControl } from '../revoke.js'
import { endRotation, markTried, rotationOf } from '../rotation.js'
import { baseUrl, currentUser, describeError, dpopKey, fetchWithToken, token } from '../session.js'
import { snippetsFor } from '../snippets.js'
import { announce } from '../status.js'

type Scheme = 'seed' | 'rfc9421'

/** What the form held when last left: coming back to Try it finds it as it was. */
const draft: { route?: string; method?: string; path?: string; query?: string; body?: string; scheme: Scheme; apiKey?: string } = { scheme: 'seed' }

interface Usable { held: HeldKey; view: KeyView }

function routeDetails (route: OfferedRoute): string {
  const where = route.prefix !== undefined ? `every path under ${route.prefix}` : `the path ${route.path ?? ''}`
  const tier = { signed: 'bearer token and a signature', bearer: 'bearer token only', public: 'no credentials' }[route.tier]
  const limits = route.rateLimits.length === 0 ? 'no rate limit' : route.rateLimits.map((l) => `${l.limit} per ${l.window} per ${l.by}`).join(', ')
  const schemes = route.signature === undefined ? '' : `; schemes: ${route.signature.map((s) => s === 'seed' ? 'seed' : 'RFC 9421').join(', ')}`
  const scopes = route.scopes.length === 0 ? 'none' : route.scopes.join(' ')
  return `Takes ${where}; methods ${route.methods.join(', ')}; ${tier}${schemes}; scopes: ${scopes}; ${limits}.`
}

function prettyBody (text: string, contentType: string): string {
  if (!/json/i.test(contentType)) return text
  try {
    return JSON.stringify(JSON.parse(text), null, 2)
  } catch {
    return text
  }
}

function parsedProblem (text: string, contentType: string): Record<string, unknown> | undefined {
  if (!/^application\/problem\+json/i.test(contentType)) return undefined
  try {
    const parsed = JSON.parse(text) as unknown
    return typeof parsed === 'object' && parsed !== null ? parsed as Record<string, unknown> : undefined
  } catch {
    return undefined
  }
}

/** The headers sent, the bearer token cut short: enough to tell tokens apart, not enough to use one. */
function sentHeaders (headers: Record<string, string>): string {
  return Object.entries(headers).map(([name, value]) =>
    `${name}: ${name.toLowerCase() === 'authorization' ? `${value.slice(0, 'Bearer '.length + 10)}…(redacted)` : value}`).join('\n')
}

interface Request { method: string; target: string; body: string; scheme: Scheme; key: HeldKey | undefined }
interface Sent extends Request { headers: Record<string, string>; signed: Signed | undefined }

/** Signs (on a signed route) and sends the request; what was sent, and the answer. */
async function send (route: OfferedRoute, input: Request): Promise<Sent & { response: Response }> {
  const { method, target, body, scheme, key } = input
  const url = new URL(target, baseUrl())
  // fetch re-encodes some characters (a ' in a query) and drops an empty "?": what it sends must be what is signed
  if (url.origin !== baseUrl() || url.pathname + url.search !== target) {
    throw new SigningInputError('target', `the browser would send ${JSON.stringify(url.pathname + url.search)} for ${JSON.stringify(target)}: write that form`)
  }
  const headers: Record<string, string> = {}
  // what fetchWithToken sends (with a DPoP-bound token, and a proof for this request), shown redacted
  if (route.tier !== 'public') headers.authorization = `${dpopKey() === undefined ? 'Bearer' : 'DPoP'} ${token()}`
  const bodyBytes = body === '' ? undefined : new TextEncoder().encode(body)
  let signed: Signed | undefined
  if (route.tier === 'signed') {
    if (key === undefined) throw new SigningInputError('key', 'choose a key this browser holds (or make one: New key)')
    const apiKey = key.apiKey
    if (scheme === 'seed') {
      const timestamp = String(Date.now())
      Object.assign(headers, await signRequest({ method, target, body: bodyBytes, apiKey, privateKey: key.privateKey, timestamp }))
      if (bodyBytes !== undefined) headers['content-type'] = 'application/json'
      signed = { scheme, apiKey, details: await describeSigningString(timestamp, method.toUpperCase(), target, bodyBytes) }
    } else {
      // created and nonce chosen here, so that the base keygate describes can be rebuilt exactly
      const nonceBytes = crypto.getRandomValues(new Uint8Array(16))
      const message = {
        method,
        target,
        body: bodyBytes,
        apiKey,
        baseUrl: baseUrl(),
        algorithm: ALGORITHMS_OF_KEY_TYPE[key.keyType][0] as MessageSignatureAlgorithm,
        created: Math.floor(Date.now() / 1000),
        nonce: btoa(String.fromCharCode(...nonceBytes)).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, ''),
        contentType: 'application/json',
        ...(route.signatureLabel !== undefined && { label: route.signatureLabel })
      }
      Object.assign(headers, await signRequest({ ...message, scheme: 'rfc9421', privateKey: key.privateKey }))
      const { signatureBase, signatureBaseSha256 } = await describeSignatureBase(message)
      signed = { scheme, apiKey, details: { signatureBase, signatureBaseSha256 } }
    }
  } else if (bodyBytes !== undefined) {
    headers['content-type'] = 'application/json'
  }
  const init = { method: method.toUpperCase(), headers, ...(bodyBytes !== undefined && { body: bodyBytes }) }
  const response = route.tier === 'public' ? await fetch(url, init) : await fetchWithToken(url, init)
  return { response, method: method.toUpperCase(), target, body, key, scheme, headers, signed }
}

async function answerView (sent: Sent & { response: Response }): Promise<{ view: HTMLElement; summary: string; ok: boolean }> {
  const { response, key } = sent
  const text = await response.text()
  const contentType = response.headers.get('content-type') ?? ''
  const problem = parsedProblem(text, contentType)
  const headerLines = [...response.headers].map(([name, value]) => `${name}: ${value}`).join('\n')
  const code = typeof problem?.code === 'string' ? problem.code : undefined
  const statusLine = `${response.status} ${response.statusText}`.trim()
  const rotation = key !== undefined && response.ok ? rotationOf(key.apiKey) : undefined
  if (key !== undefined && response.ok) markTried(key.apiKey)
  const heading = h('h2', { id: 'answer-heading', tabindex: -1 }, 'Answer')
  const view = h('section', { class: 'answer', 'aria-labelledby': 'answer-heading' },
    heading,
    h('p', { class: `status-line ${response.ok ? 'ok' : 'refused'}` }, h('strong', {}, statusLine), code !== undefined && ` ${code}`),
    problem !== undefined && h('div', { class: 'card problem' },
      h('h3', {}, `Refused: ${code ?? 'error'}`),
      typeof problem.title === 'string' && h('p', {}, h('strong', {}, problem.title)),
      typeof problem.detail === 'string' && h('p', {}, problem.detail)),
    problem !== undefined && sent.signed !== undefined && diagnosisView(problem, sent.signed),
    rotation !== undefined && h('div', { class: 'card rotation' },
      h('p', {}, `This key replaces "${rotation.oldName}", and it works: the old key can go.`),
      revokeControl({ apiKey: rotation.oldApiKey, name: rotation.oldName }, 'Revoke the old key', () => { endRotation(key?.apiKey ?? '') })),
    // the rest folded: the status and the diagnosis above stay in view, the long texts open on demand
    h('details', { class: 'fold raw' },
      h('summary', {}, `Headers and body (${bodySize(text)}${contentType === '' ? '' : `, ${contentType.split(';')[0] ?? ''}`})`),
      h('h3', {}, 'Headers'),
      h('pre', { class: 'code', tabindex: 0, 'aria-label': 'Answer headers' }, h('code', {}, headerLines)),
      h('h3', {}, 'Body'),
      text === '' ? h('p', {}, '(none)') : h('pre', { class: 'code', tabindex: 0, 'aria-label': 'Answer body' }, h('code', {}, prettyBody(text, contentType)))),
    h('details', { class: 'fold sent' },
      h('summary', {}, `What this browser sent${sent.signed === undefined ? '' : ', and what it signed'}`),
      h('pre', { class: 'code', tabindex: 0, 'aria-label': 'Request sent' },
        h('code', {}, `${sent.method} ${sent.target}\n${sentHeaders(sent.headers)}${sent.body === '' ? '' : `\n\n${sent.body}`}`)),
      sent.signed !== undefined &&
        [h('h3', {}, sent.scheme === 'seed' ? 'The signing string it signed' : 'The signature base it signed'), signedView(sent.signed)]),
    key !== undefined && snippetsView(sent, key))
  return { view, summary: `Answer: ${statusLine}${code === undefined ? '' : ` ${code}`}`, ok: response.ok }
}

/** "312 bytes", "no body" (the body as the browser decoded it, encoded again as UTF-8) */
function bodySize (text: string): string {
  if (text === '') return 'no body'
  const bytes = new TextEncoder().encode(text).length
  return bytes === 1 ? '1 byte' : `${bytes} bytes`
}

function snippetsView (sent: Sent, key: HeldKey): HTMLElement {
  const snippets = snippetsFor({
    baseUrl: baseUrl(), method: sent.method, target: sent.target, body: sent.body, apiKey: key.apiKey, keyType: key.keyType, scheme: sent.scheme
  })
  return h('details', { class: 'fold snippets' },
    h('summary', {}, 'This request as code: curl and openssl, @keygate/client, Python'),
    h('p', {}, 'Three programs that sign and send this request anew each time they run; their first lines say what they need. ' +
      'They read the private key from a file: a key made in this browser without export has none.'),
    h('h3', {}, 'curl and openssl'), copyable('curl and openssl snippet', snippets.curl),
    h('h3', {}, '@keygate/client (JavaScript)'), copyable('@keygate/client snippet', snippets.client),
    h('h3', {}, 'Python'), copyable('Python snippet', snippets.python))
}

export function tryItView (query: URLSearchParams): HTMLElement {
  const body = h('div', {}, h('p', {}, 'Loading the routes you may call and your keys…'))
  const result = h('div', {})

  const load = async (): Promise<void> => {
    const [routes, keys, held] = await Promise.all([allRoutes(), allKeys(), heldKeys(currentUser() ?? '')])
    const views = new Map(keys.map((key) => [key.apiKey, key]))
    const usable: Usable[] = held.flatMap((one) => { const view = views.get(one.apiKey); return view === undefined ? [] : [{ held: one, view }] })
    if (routes.length === 0) {
      replace(body, h('p', {}, 'Your user may call no route.'))
      return
    }
    const routeSelect = h('select', { name: 'route', id: uid('field') },
      routes.map((route) => h('option', { value: route.name }, `${route.name}: ${routePath(route)}`)))
    const routeHint = h('p', { class: 'hint', id: uid('hint') })
    routeSelect.setAttribute('aria-describedby', routeHint.id)
    const method = h('select', { name: 'method' })
    const path = h('input', { type: 'text', name: 'path', spellcheck: 'false', autocomplete: 'off', class: 'mono' })
    const queryInput = h('input', { type: 'text', name: 'query', spellcheck: 'false', autocomplete: 'off', class: 'mono' })
    const bodyInput = h('textarea', { name: 'body', rows: 5, spellcheck: 'false', class: 'mono' })
    const schemes = (['seed', 'rfc9421'] as const).map((value) => {
      const id = uid('scheme')
      const input = h('input', { type: 'radio', name: 'scheme', value, id, checked: value === draft.scheme })
      const label = value === 'seed' ? 'Seed (X-API-* headers)' : 'RFC 9421 (HTTP Message Signatures)'
      return { value, input, element: h('div', { class: 'choice' }, input, h('label', { for: id }, label)) }
    })
    const keySelect = h('select', { name: 'key' }, usable.map(({ held: one, view }) =>
      h('option', { value: one.apiKey }, `${one.name} (${KEY_TYPE_NAMES[one.keyType]}${view.status === 'active' ? '' : `, ${view.status}`})`)))
    const signing = h('div', {},
      h('fieldset', {}, h('legend', {}, 'Signature scheme'), schemes.map((s) => s.element)),
      usable.length === 0
        ? h('p', {}, 'This browser holds no key of yours to sign with. ', h('a', { href: '#/keys/new' }, 'Make one'), '.')
        : field('Key', keySelect, 'Keys whose private key this browser holds.'))
    const sendButton = h('button', { type: 'submit' }, 'Send')

    const chosenRoute = (): OfferedRoute => routes.find((route) => route.name === routeSelect.value) ?? routes[0] as OfferedRoute
    const showRoute = (keepDraft: boolean): void => {
      const route = chosenRoute()
      routeHint.textContent = routeDetails(route)
      replace(method, route.methods.map((m) => h('option', { value: m }, m)))
      if (keepDraft && draft.method !== undefined && route.methods.includes(draft.method)) method.value = draft.method
      if (!keepDraft || draft.path === undefined) path.value = routePath(route)
      signing.hidden = route.tier !== 'signed'
      for (const s of schemes) s.input.disabled = route.signature !== undefined && !route.signature.includes(s.value)
      const enabled = schemes.find((s) => !s.input.disabled && s.input.checked) ?? schemes.find((s) => !s.input.disabled)
      if (enabled !== undefined) enabled.input.checked = true
    }
    const save = (): void => {
      Object.assign(draft, {
        route: routeSelect.value,
        method: method.value,
        path: path.value,
        query: queryInput.value,
        body: bodyInput.value,
        apiKey: keySelect.value,
        scheme: schemes.find((s) => s.input.checked)?.value ?? 'seed'
      })
    }
    if (draft.route !== undefined && routes.some((route) => route.name === draft.route)) routeSelect.value = draft.route
    path.value = draft.path ?? ''
    queryInput.value = draft.query ?? ''
    bodyInput.value = draft.body ?? ''
    showRoute(true)
    const askedKey = query.get('key') ?? draft.apiKey ?? undefined
    if (askedKey !== undefined && usable.some(({ held: one }) => one.apiKey === askedKey)) keySelect.value = askedKey
    routeSelect.addEventListener('change', () => { showRoute(false); save() })

    const form = h('form', {
      class: 'card',
      oninput: save,
      onchange: save,
      onsubmit: (event: Event) => {
        event.preventDefault()
        save()
        const route = chosenRoute()
        const key = usable.find(({ held: one }) => one.apiKey === keySelect.value)?.held
        const target = path.value + (queryInput.value === '' ? '' : `?${queryInput.value}`)
        sendButton.disabled = true
        announce(`Sending ${method.value} ${target}…`)
        send(route, { method: method.value, target, body: bodyInput.value, scheme: draft.scheme, key: route.tier === 'signed' ? key : undefined })
          .then(answerView)
          .then(({ view, summary, ok }) => {
            replace(result, view)
            announce(summary, ok ? 'success' : 'error')
            view.querySelector<HTMLElement>('#answer-heading')?.focus()
          }, (err: unknown) => {
            const why = err instanceof SigningInputError || err instanceof KeygateResponseError ? err.message : describeError(err)
            announce(`Not sent: ${why}`, 'error')
          })
          .finally(() => { sendButton.disabled = false })
      }
    },
    h('div', { class: 'field' }, h('label', { for: routeSelect.id }, 'Route'), routeHint, routeSelect),
    field('Method', method),
    field('Path', path, 'The path exactly as sent and signed, e.g. /v1/clients/.'),
    field('Query (optional)', queryInput, 'Without the leading "?", e.g. limit=10: signed as written.'),
    field('Body (optional)', bodyInput,
      'Sent and signed byte for byte, as application/json; none for GET. With the seed scheme it must start with {, [, a quote or a space.'),
    signing,
    h('div', { class: 'actions' }, sendButton))
    replace(body, form)
  }
  load().catch((err: unknown) => {
    replace(body, h('p', {}, 'The routes and keys could not be loaded.'))
    announce(`The routes and keys could not be loaded: ${describeError(err)}`, 'error')
  })
  return h('section', {}, h('h1', { tabindex: -1 }, 'Try it'), body, result)
}
