// Loaded into every test process (package.json's "tap" node-arg): the tests and the sources they
// import run as Node.js itself runs TypeScript (type stripping, on by default from Node 22.18 and
// 24; tsconfig.json's erasableSyntaxOnly keeps the code within what it strips). The sources import
// each other as `./file.js` (what the compiled package holds, module NodeNext): this hook resolves
// such an import from a .ts file to the .ts beside it, and to the .js when there is none. A
// synchronous hook in this thread (module.registerHooks), so no loader thread and no tsx to load:
// about a quarter of a unit test file's CPU. Scripts that run the sources as the npm scripts do
// (npm start, npm run bench, the CLI) keep tsx (test/helpers/typescript-node.ts).
import { registerHooks } from 'node:module'

registerHooks({
  resolve (specifier, context, nextResolve) {
    if (specifier.endsWith('.js') && (specifier.startsWith('./') || specifier.startsWith('../')) && context.parentURL?.endsWith('.ts') === true) {
      try {
        return nextResolve(`${specifier.slice(0, -3)}.ts`, context)
      } catch {}
    }
    return nextResolve(specifier, context)
  }
})
