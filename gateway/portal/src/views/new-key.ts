// #/keys/new: a key made in this browser (not exportable; or exportable and downloaded for the
// CLI), or one made elsewhere with openssl, of which the page takes the public half and the proof.
import type { KeyType } from '@keygate/client'
import { copyable } from '../copy.js'
import { field, h, replace, uid } from '../dom.js'
import { fileBase, KEY_TYPE_NAMES, makeKey, opensslCommands, supportedKeyTypes } from '../key-maker.js'
import { go } from '../navigation.js'
import { api, describeError } from '../session.js'
import { announce } from '../status.js'

type Where = 'browser' | 'exportable' | 'elsewhere'

const WHERE: ReadonlyArray<{ value: Where; label: string; hint: string }> = [
  {
    value: 'browser',
    label: 'Made in this browser, not exportable (recommended)',
    hint: 'The private key is made here and kept in this browser\'s storage for this site. It can sign, but nobody can read or copy it, ' +
      'not even this page: it never leaves this browser.'
  },
  {
    value: 'exportable',
    label: 'Made in this browser, exportable, downloaded for the CLI',
    hint: 'The private key leaves the browser as a file (NAME.pem) you can use with keygate\'s CLI or openssl. Anyone who gets that file ' +
      'can sign requests as you: keep it like a password. This browser keeps a copy that can sign but, once the file is made, ' +
      'can no longer be exported by anyone, this page included.'
  },
  {
    value: 'elsewhere',
    label: 'Made elsewhere with openssl: register its public key',
    hint: 'You make the key on your machine with the commands shown; only its public half and a proof that you hold it come here.'
  }
]

interface RegisteredKey { apiKey: string; name: string }

function scopesOf (text: string): string[] | undefined {
  const scopes = text.split(/[\s,]+/).filter((scope) => scope !== '')
  return scopes.length === 0 ? undefined : scopes
}

export function newKeyView (): HTMLElement {
  const name = h('input', { type: 'text', name: 'name', required: true, maxlength: 100, autocomplete: 'off', spellcheck: 'false' })
  const type = h('select', { name: 'type', id: uid('field') })
  const scopes = h('input', { type: 'text', name: 'scopes', autocomplete: 'off', spellcheck: 'false' })
  const publicKey = h('textarea', { name: 'publicKey', rows: 6, spellcheck: 'false', class: 'mono' })
  const proof = h('textarea', { name: 'proof', rows: 3, spellcheck: 'false', class: 'mono' })
  // enabled once the browser's key types are known
  const submit = h('button', { type: 'submit', disabled: true }, 'Create key')
  const commands = h('div', {})
  const radios = WHERE.map(({ value, label, hint }) => {
    const id = uid('where')
    const input = h('input', { type: 'radio', name: 'where', value, id, checked: value === 'browser', 'aria-describedby': `${id}-hint` })
    return { value, input, element: h('div', { class: 'choice' }, input, h('label', { for: id }, label), h('p', { class: 'hint', id: `${id}-hint` }, hint)) }
  })
  const where = (): Where => radios.find((radio) => radio.input.checked)?.value ?? 'browser'
  const elsewhere = h('div', { class: 'elsewhere', hidden: true },
    h('h2', {}, 'Make the key with openssl'),
    h('p', {}, 'Run these commands (OpenSSL 3) in a terminal: they make the private key, its public half, and the proof (your key\'s name, signed by it).'),
    commands,
    field('Public key (PEM)', publicKey, 'The whole content of the .pub.pem file, from -----BEGIN PUBLIC KEY----- to -----END PUBLIC KEY-----.'),
    field('Proof (base64)', proof, 'The content of the .proof file: the name signed, base64 on one line.'))

  let supported: KeyType[] = []
  const showTypes = (): void => {
    const kept = type.value
    const offered: KeyType[] = where() === 'elsewhere' ? ['ed25519', 'p256', 'rsa'] : supported
    replace(type, offered.map((value) => h('option', { value }, KEY_TYPE_NAMES[value])))
    if (offered.includes(kept as KeyType)) type.value = kept
  }
  const showCommands = (): void => {
    const keyName = name.value === '' ? 'my-key' : name.value
    replace(commands, copyable('openssl commands', opensslCommands(keyName, type.value as KeyType)),
      h('p', {}, `Then paste ${fileBase(keyName)}.pub.pem and ${fileBase(keyName)}.proof below. ` +
        `${fileBase(keyName)}.pem is your private key: it stays with you.`))
  }
  const update = (): void => {
    const mode = where()
    showTypes()
    elsewhere.hidden = mode !== 'elsewhere'
    publicKey.required = proof.required = mode === 'elsewhere'
    submit.textContent = mode === 'elsewhere' ? 'Register key' : mode === 'exportable' ? 'Create and download key' : 'Create key'
    if (mode === 'elsewhere') showCommands()
  }
  for (const radio of radios) radio.input.addEventListener('change', update)
  name.addEventListener('input', () => { if (where() === 'elsewhere') showCommands() })
  type.addEventListener('change', () => { if (where() === 'elsewhere') showCommands() })
  const typeHint = h('p', { class: 'hint', id: uid('hint') }, 'Finding which key types this browser makes…')
  type.setAttribute('aria-describedby', typeHint.id)
  supportedKeyTypes().then((types) => {
    supported = types
    typeHint.textContent = types.length === 3
      ? 'Ed25519 and P-256 make short keys and signatures; RSA-2048 is there for older tools.'
      : `This browser makes ${types.map((t) => KEY_TYPE_NAMES[t]).join(' and ')} keys.`
    update()
    submit.disabled = false
  }, (err: unknown) => { typeHint.textContent = `This browser cannot make keys: ${describeError(err)}` })

  const register = async (): Promise<RegisteredKey & { downloaded?: string | undefined }> => {
    const mode = where()
    if (mode === 'elsewhere') {
      const asked = scopesOf(scopes.value)
      const body = { name: name.value, publicKey: publicKey.value.trim() + '\n', signature: proof.value.trim(), ...(asked !== undefined && { scopes: asked }) }
      return await api<RegisteredKey>('POST', '/v1/api-keys', body)
    }
    return await makeKey(name.value, type.value as KeyType, { exportable: mode === 'exportable', scopes: scopesOf(scopes.value) })
  }
  const form = h('form', {
    class: 'card',
    onsubmit: (event: Event) => {
      event.preventDefault()
      submit.disabled = true
      announce(where() === 'elsewhere' ? 'Registering the key…' : 'Making and registering the key…')
      register().then((made) => {
        const downloaded = made.downloaded === undefined ? '' : ` Its private key was downloaded as ${made.downloaded}.`
        go(`#/keys/${made.apiKey}`, `Key "${made.name}" registered.${downloaded}`)
      }, (err: unknown) => {
        submit.disabled = false
        announce(`The key was not registered: ${describeError(err)}`, 'error')
      })
    }
  },
  field('Name', name, 'Unique among your keys: letters, digits, spaces and punctuation (printable ASCII), at most 100. Upstreams see it.'),
  h('fieldset', {}, h('legend', {}, 'Where the private key is made and kept'), radios.map((radio) => radio.element)),
  h('div', { class: 'field' }, h('label', { for: type.id }, 'Key type'), typeHint, type),
  field('Scopes (optional)', scopes, 'Some of your scopes, separated by spaces, for a key that may do less than you; empty: all of yours.'),
  elsewhere,
  h('div', { class: 'actions' }, submit))
  update()
  return h('section', {}, h('p', { class: 'crumbs' }, h('a', { href: '#/keys' }, 'Your keys')), h('h1', { tabindex: -1 }, 'New key'), form)
}
