// A <pre> with a Copy button: the text is copied as it is shown.
import { h } from './dom.js'
import { announce } from './status.js'

export function copyable (label: string, text: string): HTMLElement {
  const pre = h('pre', { class: 'code', tabindex: 0, 'aria-label': label }, h('code', {}, text))
  const button = h('button', {
    type: 'button',
    class: 'secondary',
    onclick: () => {
      navigator.clipboard.writeText(text).then(
        () => { announce(`${label}: copied`, 'success') },
        () => {
          // no clipboard permission: select it, for the keyboard's copy
          const range = document.createRange()
          range.selectNodeContents(pre)
          getSelection()?.removeAllRanges()
          getSelection()?.addRange(range)
          announce(`${label}: selected; press Ctrl+C (⌘C) to copy`, 'info')
        })
    }
  }, `Copy ${label}`)
  return h('div', { class: 'copyable' }, pre, button)
}
