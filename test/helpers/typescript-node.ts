/**
 * The Node.js flags that run this checkout's TypeScript sources as the npm scripts do: tsx for
 * the .ts files, and the keygate-source condition, under which `#client` and `@keygate/client`
 * resolve to client/src rather than to the compiled dist/ that only `npm run build` makes.
 */
export const TYPESCRIPT_NODE_ARGS: readonly string[] = ['--conditions=keygate-source', '--import', 'tsx']
