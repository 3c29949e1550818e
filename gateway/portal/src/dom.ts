// The portal's one way of making DOM: h('tag', attributes, ...children). Text always becomes a
// text node (never HTML), attributes are set one by one, and a function under an "on..." name is
// an event listener. There is no `style` attribute (the CSP refuses inline styles: use a class)
// and no way to set innerHTML.
export type Child = Node | string | number | null | undefined | false | Child[]
export type Attributes = Record<string, string | number | boolean | null | undefined | ((event: Event) => void)>

export function h<K extends keyof HTMLElementTagNameMap> (tag: K, attributes: Attributes = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag)
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue
    if (name === 'style' || name === 'innerHTML') throw new Error(`h(): no ${name} (the CSP refuses inline styles; text is set as text)`)
    if (typeof value === 'function') {
      element.addEventListener(name.slice(2).toLowerCase(), value)
    } else if (name === 'value' && (element instanceof HTMLInputElement || element instanceof HTMLTextAreaElement || element instanceof HTMLSelectElement)) {
      element.value = String(value)
    } else {
      element.setAttribute(name, value === true ? '' : String(value))
    }
  }
  append(element, children)
  return element
}

function append (parent: Node, children: Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue
    if (Array.isArray(child)) append(parent, child)
    else parent.appendChild(child instanceof Node ? child : document.createTextNode(String(child)))
  }
}

/** Replaces what `parent` holds with `children`. */
export function replace (parent: Element, ...children: Child[]): void {
  parent.replaceChildren()
  append(parent, children)
}

let lastId = 0
/** An id unique in the page, for label for= and aria-describedby. */
export function uid (prefix: string): string {
  return `${prefix}-${++lastId}`
}

/** A labelled control: the label, the control, and an optional hint the control is described by. */
export function field (label: string, control: HTMLInputElement | HTMLSelectElement | HTMLTextAreaElement, hint?: Child): HTMLElement {
  if (control.id === '') control.id = uid('field')
  let hintElement: HTMLElement | undefined
  if (hint !== undefined && hint !== null && hint !== false) {
    hintElement = h('p', { class: 'hint', id: uid('hint') }, hint)
    control.setAttribute('aria-describedby', hintElement.id)
  }
  return h('div', { class: 'field' }, h('label', { for: control.id }, label), hintElement, control)
}

/** A <time> for an ISO 8601 instant, shown as "2025-06-01 14:05 UTC"; or the text for none. */
export function when (iso: string | null | undefined, none: string): HTMLElement | string {
  if (iso === null || iso === undefined) return none
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return iso
  return h('time', { datetime: iso }, `${date.toISOString().slice(0, 16).replace('T', ' ')} UTC`)
}
