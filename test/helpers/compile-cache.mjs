// Loaded first into every test process (package.json's "tap" node-arg), before tsx: Node's
// compile cache (module.enableCompileCache) in node_modules/.cache/keygate/, so each of the suite's
// ~190 test processes, and the keygate, bench and npm processes they start (which inherit
// NODE_COMPILE_CACHE), reuses the V8 code of fastify, ioredis, tap and the gateway's modules that
// an earlier process compiled, instead of compiling them again. A cache, not a change: a module
// whose source changed is compiled afresh. JavaScript, as it is loaded before typescript-imports.mjs, the hook that resolves the sources.
import { enableCompileCache } from 'node:module'
import { fileURLToPath } from 'node:url'

const dir = fileURLToPath(new URL('../../node_modules/.cache/keygate/compile-cache', import.meta.url))
process.env.NODE_COMPILE_CACHE ??= dir
enableCompileCache(process.env.NODE_COMPILE_CACHE)
