// #/login: username and password for a bearer token (POST /v1/auth/token); and, when keygate
// trusts identity providers that log the portal in, a link to each ("Log in with ..."): a
// navigation to keygate's <prefix>/oidc/<name>/start, which sends the browser on to the IdP.
// Back from it, keygate sends the page to #/login?handoff=<id>: the view takes the token with it
// (session.ts) and replaces the URL, so the handoff leaves the history.
import { field, h, replace } from '../dom.js'
import { go } from '../navigation.js'
import { describeError, logIn, logInWithHandoff, loginProviders } from '../session.js'
import { announce } from '../status.js'

/** the handoff id keygate's callback names: 43 base64url characters */
const HANDOFF = /^[A-Za-z0-9_-]{43}$/

function completeLogin (handoff: string, next: string): void {
  // the handoff is spent once taken: it leaves the address bar and the history at once
  history.replaceState(history.state, '', '#/login')
  announce('Logging in…')
  logInWithHandoff(handoff).then(({ username, then }) => {
    go(then === '#/keys' ? next : then, `Logged in as ${username}.`, 'success', true)
  }, (err: unknown) => {
    announce(`Not logged in: ${describeError(err)}`, 'error')
  })
}

export function loginView (next: string, query: URLSearchParams = new URLSearchParams()): HTMLElement {
  const handoff = query.get('handoff')
  if (handoff !== null) {
    if (HANDOFF.test(handoff)) completeLogin(handoff, next)
    else history.replaceState(history.state, '', '#/login')
  }
  const username = h('input', { type: 'text', name: 'username', autocomplete: 'username', required: true, 'data-autofocus': true })
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true })
  const submit = h('button', { type: 'submit' }, 'Log in')
  const form = h('form', {
    class: 'card',
    'aria-label': 'Log in with a password',
    onsubmit: (event: Event) => {
      event.preventDefault()
      submit.disabled = true
      announce('Logging in…')
      logIn(username.value, password.value).then(() => {
        go(next, `Logged in as ${username.value}.`)
      }, (err: unknown) => {
        submit.disabled = false
        password.value = ''
        announce(`Not logged in: ${describeError(err)}`, 'error')
        password.focus()
      })
    }
  },
  field('Username', username),
  field('Password', password),
  h('div', { class: 'actions' }, submit))
  // filled when keygate names identity providers; empty (and hidden) otherwise
  const providers = h('div', { class: 'card providers', hidden: true })
  loginProviders().then((list) => {
    if (list.length === 0) return
    replace(providers,
      h('ul', { class: 'actions', 'aria-label': 'Log in with your identity provider' }, list.map(({ name, label }) =>
        h('li', {}, h('a', { class: 'button', href: `oidc/${encodeURIComponent(name)}/start?then=${encodeURIComponent(next)}` }, `Log in with ${label}`)))),
      h('p', { class: 'note' }, 'Or, with a keygate account of your own, with its password:'))
    providers.hidden = false
  }, () => undefined)
  return h('section', {},
    h('h1', { tabindex: -1 }, 'Log in'),
    h('p', { class: 'note' }, 'Your session lives in this page only (its token is never stored): reloading the page asks you to log in again.'),
    providers,
    form)
}
