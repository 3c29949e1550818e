/** What a reload changed in a list of named things: the names added, removed, and changed (same name, another fingerprint). */
export interface Changes {
  added: string[]
  removed: string[]
  changed: string[]
}

export function changesByName<T> (before: readonly T[], after: readonly T[], name: (item: T) => string, fingerprint: (item: T) => string): Changes {
  const old = new Map(before.map((item) => [name(item), fingerprint(item)]))
  const now = new Map(after.map((item) => [name(item), fingerprint(item)]))
  return {
    added: [...now.keys()].filter((n) => !old.has(n)),
    removed: [...old.keys()].filter((n) => !now.has(n)),
    changed: [...now].filter(([n, f]) => old.has(n) && old.get(n) !== f).map(([n]) => n)
  }
}
