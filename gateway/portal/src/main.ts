// The developer portal: one page, views chosen by the URL's hash (#/login, #/keys, #/keys/new,
// #/keys/{apiKey}, #/try), everything protocol done by @keygate/client, everything else by the API
// the CLI uses too.
//
// No UI framework: a handful of views that are shown, not kept in sync, need no more than
// dom.ts's h(); the bundle carries only the client and this code; and with no framework there is
// no template to escape. Text from keygate or the user only ever becomes a text node (h() and
// textContent, never innerHTML), so nothing it holds can become markup or script: no XSS sink.
import { API_KEY_PATTERN } from '@keygate/client/protocol'
import { h, replace } from './dom.js'
import { go, takeMove } from './navigation.js'
import { currentUser, loggedIn, logOut, whenExpired } from './session.js'
import { announce, clearStatus } from './status.js'
import { keyView } from './views/key.js'
import { keysView } from './views/keys.js'
import { loginView } from './views/login.js'
import { newKeyView } from './views/new-key.js'
import { tryItView } from './views/try-it.js'

const NAV: ReadonlyArray<[hash: string, label: string]> = [['#/keys', 'Your keys'], ['#/keys/new', 'New key'], ['#/try', 'Try it']]
const SITE = 'keygate developer portal'

/** Where to go once logged in: the view asked for before the login. */
let afterLogin = '#/keys'

function parseHash (): { path: string; query: URLSearchParams } {
  const hash = location.hash.replace(/^#/, '')
  const at = hash.indexOf('?')
  return { path: at === -1 ? hash : hash.slice(0, at), query: new URLSearchParams(at === -1 ? '' : hash.slice(at + 1)) }
}

/** a key's own view: #/keys/{apiKey} */
const KEY_PATH = '/keys/'

function viewFor (path: string, query: URLSearchParams): HTMLElement | undefined {
  if (path === '/keys') return keysView()
  if (path === '/keys/new') return newKeyView()
  const key = path.startsWith(KEY_PATH) ? path.slice(KEY_PATH.length) : ''
  if (API_KEY_PATTERN.test(key)) return keyView(key)
  if (path === '/try') return tryItView(query)
  return undefined
}

function showNav (current: string): void {
  const nav = document.getElementById('nav')
  if (nav === null) return
  nav.hidden = !loggedIn()
  if (!loggedIn()) { replace(nav); return }
  replace(nav,
    h('ul', {}, NAV.map(([hash, label]) => h('li', {}, h('a', { href: hash, ...(current === hash && { 'aria-current': 'page' }) }, label)))),
    h('p', { class: 'who' }, `Logged in as ${currentUser() ?? ''}`,
      h('button', { type: 'button', class: 'secondary', onclick: () => { logOut(); go('#/login', 'Logged out.') } }, 'Log out')))
}

function render (): void {
  const app = document.getElementById('app')
  if (app === null) return
  const move = takeMove()
  if (move === undefined) clearStatus()
  else if (move.message !== undefined) announce(move.message.text, move.message.kind)
  const { path, query } = parseHash()
  let view: HTMLElement | undefined
  if (!loggedIn()) {
    if (path !== '/login') {
      if (path !== '' && path !== '/') afterLogin = `#${location.hash.replace(/^#/, '')}`
      location.replace('#/login')
      return
    }
    view = loginView(afterLogin, query)
  } else if (path === '/login' || path === '' || path === '/') {
    location.replace('#/keys')
    return
  } else {
    view = viewFor(path, query) ??
      h('section', {}, h('h1', { tabindex: -1 }, 'Not found'), h('p', {}, 'No such page. ', h('a', { href: '#/keys' }, 'Your keys')))
  }
  showNav(`#${path}`)
  replace(app, view)
  const heading = view.querySelector('h1')
  document.title = `${heading?.textContent ?? ''} · ${SITE}`
  // the view's first control when it asks for one (the login form), else its heading: where a screen reader should start
  const focus = view.querySelector<HTMLElement>('[data-autofocus]') ?? heading
  focus?.focus()
}

whenExpired((reason) => {
  afterLogin = location.hash === '' ? '#/keys' : location.hash
  go('#/login', reason, 'error')
})
window.addEventListener('hashchange', render)
render()
