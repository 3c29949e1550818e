// Revoking a key, in two steps: a button, then a confirmation saying what it means, then DELETE
// /v1/api-keys/{apiKey}. Used for a key on its own page and for the old key of a rotation.
import { h, replace } from './dom.js'
import { revokeKey } from './keygate-api.js'
import { describeError } from './session.js'
import { announce } from './status.js'

export function revokeControl (key: { apiKey: string; name: string }, label: string, done: () => void): HTMLElement {
  const box = h('div', { class: 'revoke' })
  const ask = (): void => {
    const question = h('p', { tabindex: -1 },
      `Revoke the key "${key.name}"? From now on keygate refuses every request it signs (401 UNKNOWN_API_KEY). This cannot be undone.`)
    const confirm = h('button', {
      type: 'button',
      class: 'danger',
      onclick: () => {
        confirm.disabled = true
        announce(`Revoking "${key.name}"…`)
        revokeKey(key.apiKey).then(() => {
          announce(`Key "${key.name}" revoked: keygate refuses it from now on.`, 'success')
          done()
        }, (err: unknown) => {
          confirm.disabled = false
          announce(`The key was not revoked: ${describeError(err)}`, 'error')
        })
      }
    }, `Yes, revoke "${key.name}"`)
    replace(box, h('div', { class: 'confirm', role: 'group', 'aria-label': `Confirm revoking "${key.name}"` },
      question,
      h('div', { class: 'actions' }, confirm, h('button', { type: 'button', class: 'secondary', onclick: () => { show(); start.focus() } }, 'Cancel'))))
    question.focus()
  }
  const start = h('button', { type: 'button', class: 'danger', onclick: ask }, label)
  const show = (): void => { replace(box, start) }
  show()
  return box
}
