// #/keys/{apiKey}: one of the user's keys: what keygate says of it, whether this browser holds its
// private key, its requests over the last hour and day (GET /v1/api-keys/{apiKey}/usage/series),
// where it stands against its per-key limits (GET /v1/api-keys/{apiKey}/usage), and rotating or
// revoking it.
import { callsTables } from '../calls-table.js'
import { h, replace, when } from '../dom.js'
import { allKeys, keySeries, keyUsage, type KeyView } from '../keygate-api.js'
import { makeKey, supportedKeyTypes } from '../key-maker.js'
import { forgetKey, type HeldKey, heldKey } from '../key-store.js'
import { go } from '../navigation.js'
import { revokeControl } from '../revoke.js'
import { endRotation, rotationOf, startRotation } from '../rotation.js'
import { currentUser, describeError } from '../session.js'
import { announce } from '../status.js'
import { usageTable } from '../usage-table.js'
import { keyTypeText, scopesText } from './keys.js'

/** The new key's name: the old one's, marked rotated with the time (names are unique per user, at most 100 characters). */
function rotatedName (name: string): string {
  const stamp = ` (rotated ${new Date().toISOString().slice(0, 19).replace('T', ' ')})`
  return name.replace(/ \(rotated [^)]*\)$/, '').slice(0, 100 - stamp.length) + stamp
}

function privateKeyText (held: HeldKey | undefined): string {
  if (held === undefined) return 'not in this browser'
  return held.exportable ? 'in this browser, not exportable (made exportable: a copy was downloaded as a file once)' : 'in this browser, not exportable'
}

async function rotate (key: KeyView, button: HTMLButtonElement): Promise<void> {
  button.disabled = true
  const supported = await supportedKeyTypes()
  const type = key.keyType !== undefined && supported.includes(key.keyType) ? key.keyType : supported[0] ?? 'rsa'
  const name = rotatedName(key.name)
  announce(`Making and registering a new ${type} key, "${name}"…`)
  try {
    const made = await makeKey(name, type, { exportable: false, scopes: key.scopes ?? undefined })
    startRotation(made.apiKey, key.apiKey, key.name)
    go(`#/keys/${made.apiKey}`, `New key "${name}" registered to replace "${key.name}". Try it with the new key; then revoke the old one.`)
  } catch (err) {
    button.disabled = false
    announce(`No new key: ${describeError(err)}`, 'error')
  }
}

function rotationPanel (key: KeyView, refresh: () => void): HTMLElement | undefined {
  const rotation = rotationOf(key.apiKey)
  if (rotation === undefined) return undefined
  const old = { apiKey: rotation.oldApiKey, name: rotation.oldName }
  return h('section', { class: 'card rotation', 'aria-labelledby': 'rotation-heading' },
    h('h2', { id: 'rotation-heading' }, 'Rotation'),
    h('p', {}, `This key replaces "${rotation.oldName}". `, rotation.tried
      ? 'A request signed with it has worked: the old key can go.'
      : ['Once a request signed with it works (', h('a', { href: `#/try?key=${key.apiKey}` }, 'Try it'), '), revoke the old key here.']),
    rotation.tried && revokeControl(old, 'Revoke the old key', () => { endRotation(key.apiKey); refresh() }))
}

export function keyView (apiKey: string): HTMLElement {
  const heading = h('h1', { tabindex: -1 }, 'Key')
  const body = h('div', {}, h('p', {}, 'Loading the key…'))
  const refresh = (): void => { go(`#/keys/${apiKey}`) }

  const load = async (): Promise<void> => {
    const user = currentUser() ?? ''
    const [keys, held] = await Promise.all([allKeys(), heldKey(user, apiKey)])
    const key = keys.find((candidate) => candidate.apiKey === apiKey)
    if (key === undefined) {
      heading.textContent = 'Key not found'
      replace(body, h('p', {}, 'You have no key with this apiKey. ', h('a', { href: '#/keys' }, 'Your keys')))
      return
    }
    heading.textContent = `Key "${key.name}"`
    document.title = `${heading.textContent} · keygate developer portal`
    const rotateButton = h('button', { type: 'button', class: 'secondary', onclick: () => { void rotate(key, rotateButton) } }, 'Rotate')
    const calls = h('div', { class: 'calls' }, h('p', {}, 'Loading its requests…'))
    const usage = h('div', { class: 'limits' }, h('p', {}, 'Loading its limits…'))
    const showUsage = async (): Promise<void> => {
      const series = Promise.all([keySeries(apiKey, '1h'), keySeries(apiKey, '1d')]).then(([hour, day]) => {
        replace(calls, callsTables(key.name, hour, day))
      }, (err: unknown) => { replace(calls, h('p', {}, `Its requests could not be loaded: ${describeError(err)}`)) })
      const limits = keyUsage(apiKey).then((items) => {
        replace(usage, usageTable(`Limits per key of "${key.name}"`, items, 'No route this key may call has a limit per key.'))
      }, (err: unknown) => { replace(usage, h('p', {}, `Its usage could not be loaded: ${describeError(err)}`)) })
      await Promise.all([series, limits])
    }
    const reloadButton = h('button', {
      type: 'button',
      class: 'secondary',
      onclick: () => {
        reloadButton.disabled = true
        void showUsage().finally(() => {
          reloadButton.disabled = false
          announce(`The usage of "${key.name}" is reloaded.`)
        })
      }
    }, 'Reload its usage')
    replace(body,
      h('dl', { class: 'facts' },
        h('dt', {}, 'apiKey'), h('dd', {}, h('code', { class: 'apikey' }, key.apiKey)),
        h('dt', {}, 'Type'), h('dd', {}, keyTypeText(key)),
        h('dt', {}, 'Scopes'), h('dd', {}, scopesText(key.scopes)),
        h('dt', {}, 'Created'), h('dd', {}, when(key.createdAt, '—')),
        h('dt', {}, 'Last used'), h('dd', {}, when(key.lastUsedAt, 'never')),
        h('dt', {}, 'Expires'), h('dd', {}, when(key.expiresAt, 'never')),
        h('dt', {}, 'State'),
        h('dd', {}, h('span', { class: `state state-${key.status}` }, key.status), key.revokedAt !== undefined && [' since ', when(key.revokedAt, '')]),
        h('dt', {}, 'Private key'), h('dd', {}, privateKeyText(held))),
      rotationPanel(key, refresh),
      key.status === 'active'
        ? h('div', { class: 'actions' },
          held !== undefined && h('a', { class: 'button', href: `#/try?key=${key.apiKey}` }, 'Try it with this key'),
          rotateButton,
          revokeControl(key, 'Revoke', refresh))
        : held !== undefined && h('div', { class: 'actions' }, h('button', {
          type: 'button',
          class: 'secondary',
          onclick: () => {
            forgetKey(apiKey).then(() => { go(`#/keys/${apiKey}`, `The private key of "${key.name}" is gone from this browser.`) },
              (err: unknown) => { announce(describeError(err), 'error') })
          }
        }, 'Delete its private key from this browser')),
      h('h2', {}, 'Usage of this key'),
      h('p', { class: 'hint' }, 'The requests signed with this key that business routes answered, as every gateway counted them. ' +
        'Gateways write their counts every few seconds: a request just made may take that long to show.'),
      calls,
      usage,
      h('div', { class: 'actions' }, reloadButton))
    void showUsage()
  }
  load().catch((err: unknown) => {
    replace(body, h('p', {}, 'The key could not be loaded.'))
    announce(`The key could not be loaded: ${describeError(err)}`, 'error')
  })
  return h('section', {}, h('p', { class: 'crumbs' }, h('a', { href: '#/keys' }, 'Your keys')), heading, body)
}
