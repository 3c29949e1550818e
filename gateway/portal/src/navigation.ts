// Moving between views: the hash says which (#/keys, #/try, ...). A move made by the page (go) may
// carry a message, said in the live region once the next view is shown, and keeps the message
// already there otherwise; a move made by the user (a link, the back button) starts afresh.
import type { StatusKind } from './status.js'

interface Move { message?: { text: string; kind: StatusKind } }
let pending: Move | undefined

/** `replace`: the view takes the current one's place in the history (a URL that must not be gone back to). */
export function go (hash: string, message?: string, kind: StatusKind = 'success', replace = false): void {
  pending = message === undefined ? {} : { message: { text: message, kind } }
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent('hashchange'))
  else if (replace) location.replace(hash)
  else location.hash = hash
}

/** The move the page just made (undefined: the user moved), once. */
export function takeMove (): Move | undefined {
  const move = pending
  pending = undefined
  return move
}
