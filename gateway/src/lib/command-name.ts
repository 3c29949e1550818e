/**
 * How the user runs keygate's command, for usage lines and hints: `keygate` when it is the
 * installed command, `npm run keygate --` when npm runs it as a script of a checkout.
 */
export function keygateCommand (): string {
  return process.env.npm_lifecycle_event === 'keygate' ? 'npm run keygate --' : 'keygate'
}
