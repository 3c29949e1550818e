// #/login: username and password for a bearer token (POST /v1/auth/token).
import { field, h } from '../dom.js'
import { go } from '../navigation.js'
import { describeError, logIn } from '../session.js'
import { announce } from '../status.js'

export function loginView (next: string): HTMLElement {
  const username = h('input', { type: 'text', name: 'username', autocomplete: 'username', required: true, 'data-autofocus': true })
  const password = h('input', { type: 'password', name: 'password', autocomplete: 'current-password', required: true })
  const submit = h('button', { type: 'submit' }, 'Log in')
  const form = h('form', {
    class: 'card',
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
  return h('section', {},
    h('h1', { tabindex: -1 }, 'Log in'),
    h('p', { class: 'note' }, 'Your session lives in this page only (its token is never stored): reloading the page asks you to log in again.'),
    form)
}
