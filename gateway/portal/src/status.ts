// The page's one live region (index.html's #status): what just happened, said to screen readers too.
export type StatusKind = 'info' | 'success' | 'error'

export function announce (message: string, kind: StatusKind = 'info'): void {
  const region = document.getElementById('status')
  if (region === null) return
  region.className = message === '' ? 'status' : `status status-${kind}`
  region.textContent = message
}

export function clearStatus (): void {
  announce('')
}
