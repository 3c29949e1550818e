/**
 * Whether keygate runs from a checkout's TypeScript sources (through tsx, as `npm start` and
 * `npm run keygate` run it); the package, installed or in the Docker image, runs compiled JavaScript.
 */
export const RUNS_FROM_SOURCES = import.meta.url.endsWith('.ts')

/**
 * How the user runs keygate's command, for usage lines and hints: `npm run keygate --` in a
 * checkout (or wherever npm runs it as a script named keygate), `keygate` where the package is
 * installed and the command is the package's bin.
 */
export function keygateCommand (env: NodeJS.ProcessEnv = process.env, fromSources = RUNS_FROM_SOURCES): string {
  return fromSources || env.npm_lifecycle_event === 'keygate' ? 'npm run keygate --' : 'keygate'
}
