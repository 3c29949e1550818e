// One lint config and one code style for the whole repository: neostandard (standard's rules for
// TypeScript, maintained by the Node.js tooling group), plus a line length.
import neostandard from 'neostandard'

export default [
  ...neostandard({
    ts: true,
    ignores: ['node_modules/', 'dist/', '**/dist/', 'coverage/', '.tap/']
  }),
  {
    rules: {
      // TypeBox's idiom names a schema and its type alike (`const X = Type.Object(...)`, `type X =
      // Static<typeof X>`); TypeScript itself reports a real redeclaration.
      'no-redeclare': 'off',
      '@typescript-eslint/no-redeclare': 'off',
      // `void promise` marks a promise deliberately not awaited (a reload, a refresh, a page event).
      'no-void': ['error', { allowAsStatement: true }],
      // A variable set once, but read by a closure before that (a handler installed before the thing
      // it handles exists), must stay `let`.
      'prefer-const': ['error', { destructuring: 'all', ignoreReadBeforeAssign: true }],
      camelcase: ['error', { properties: 'never', allow: ['^OpenAPIV3_1$'] }],
      // Long strings (error messages, test tables) read better whole than cut; 160 leaves room.
      '@stylistic/max-len': ['error', { code: 160, ignoreUrls: true, ignoreRegExpLiterals: true }]
    }
  }
]
