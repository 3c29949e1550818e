// #/keys: the user's keys (GET /v1/api-keys, a page at a time), which of them this browser holds
// the private key of, and where the user stands against per-user limits (GET /v1/usage).
import { h, replace, when } from '../dom.js'
import { type KeyView, listKeys, userUsage } from '../keygate-api.js'
import { KEY_TYPE_NAMES } from '../key-maker.js'
import { heldKeys } from '../key-store.js'
import { currentUser, describeError } from '../session.js'
import { announce } from '../status.js'
import { usageTable } from '../usage-table.js'

const STATE_NAMES: Readonly<Record<KeyView['status'], string>> = { active: 'Active', revoked: 'Revoked', expired: 'Expired' }

export function scopesText (scopes: string[] | null): string {
  if (scopes === null) return 'all of yours'
  return scopes.length === 0 ? 'none' : scopes.join(' ')
}

export function keyTypeText (key: Pick<KeyView, 'keyType'>): string {
  return key.keyType === undefined ? 'unknown' : KEY_TYPE_NAMES[key.keyType]
}

function keyTable (keys: KeyView[], held: Set<string>, page: number): HTMLElement {
  return h('div', { class: 'table-wrap' }, h('table', { class: 'keys' },
    h('caption', {}, `Your keys, page ${page}, newest first`),
    h('thead', {}, h('tr', {},
      ['Name', 'Type', 'Scopes', 'Created', 'Last used', 'Expires', 'State', 'Private key'].map((title) => h('th', { scope: 'col' }, title)))),
    h('tbody', {}, keys.map((key) => h('tr', { class: key.status === 'active' ? undefined : 'inactive' },
      h('th', { scope: 'row' }, h('a', { href: `#/keys/${key.apiKey}` }, key.name)),
      h('td', {}, keyTypeText(key)),
      h('td', {}, scopesText(key.scopes)),
      h('td', {}, when(key.createdAt, '—')),
      h('td', {}, when(key.lastUsedAt, 'never')),
      h('td', {}, when(key.expiresAt, 'never')),
      h('td', {}, h('span', { class: `state state-${key.status}` }, STATE_NAMES[key.status])),
      h('td', {}, held.has(key.apiKey) ? h('span', { class: 'held' }, 'in this browser') : 'elsewhere'))))))
}

export function keysView (): HTMLElement {
  const list = h('div', {}, h('p', {}, 'Loading your keys…'))
  const usage = h('div', {}, h('p', {}, 'Loading your usage…'))
  // the cursors of the pages seen: pages[i] is the cursor that asked for page i + 1
  const pages: Array<string | undefined> = [undefined]
  let at = 0
  // one page at a time: a second press while a page loads is ignored
  let busy = false

  const show = async (focusAfter?: 'previous' | 'next'): Promise<void> => {
    const [page, held] = await Promise.all([listKeys(pages[at]), heldKeys(currentUser() ?? '')])
    if (page.next_cursor !== null) pages[at + 1] = page.next_cursor
    const pageButton = (label: string, disabled: boolean, step: -1 | 1): HTMLButtonElement => h('button', {
      type: 'button', class: 'secondary', disabled, onclick: () => { if (!busy) { at += step; void load(step === 1 ? 'next' : 'previous') } }
    }, label)
    const previous = pageButton('Previous page', at === 0, -1)
    const next = pageButton('Next page', page.next_cursor === null, 1)
    replace(list, page.items.length === 0 && at === 0
      ? h('p', {}, 'You have no keys yet. ', h('a', { href: '#/keys/new' }, 'Make one'), '.')
      : [keyTable(page.items, new Set(held.map((key) => key.apiKey)), at + 1),
          (at > 0 || page.next_cursor !== null) && h('nav', { class: 'pager', 'aria-label': 'Pages of keys' }, previous, next)])
    if (focusAfter !== undefined) {
      // the button pressed is disabled on the first or last page: the focus stays on the pager
      const pressed = focusAfter === 'next' ? next : previous
      const target = pressed.disabled ? (focusAfter === 'next' ? previous : next) : pressed
      target.focus()
    }
  }
  const load = async (focusAfter?: 'previous' | 'next'): Promise<void> => {
    busy = true
    try {
      await show(focusAfter)
    } catch (err) {
      replace(list, h('p', {}, 'Your keys could not be loaded.'))
      announce(`Your keys could not be loaded: ${describeError(err)}`, 'error')
    } finally {
      busy = false
    }
  }
  void load()
  userUsage().then((items) => {
    replace(usage, usageTable('Your limits per user, over all your keys and your token', items, 'No route you may call has a limit per user.'))
  }, (err: unknown) => {
    replace(usage, h('p', {}, `Your usage could not be loaded: ${describeError(err)}`))
  })

  return h('section', {},
    h('h1', { tabindex: -1 }, 'Your keys'),
    h('p', {}, 'Each key signs requests for you. "In this browser": this browser holds its private key, so Try it can sign with it. ',
      h('a', { href: '#/keys/new' }, 'New key')),
    list,
    h('h2', {}, 'Your usage'),
    usage)
}
