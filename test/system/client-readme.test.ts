// The client developer's pages, run as a reader runs them: client/README.md's "Install" blocks
// install the packed @keygate/client (test/helpers/packages.ts) into an empty project, and its
// code blocks ("Quick start" (which client-package.test.ts also compiles with tsc), "CommonJS", "RFC 9421 (`scheme: 'rfc9421'`)",
// "DPoP: tokens bound to a key", "Errors", "Debugging an
// INVALID_SIGNATURE") and docs/signing.md's "RFC 9421: HTTP Message Signatures" blocks (the
// TypeScript one, and the `keygate call` one on the compiled CLI) run there as the reader's files,
// with plain Node.js, against one real gateway. Each block is read from its page (test/helpers/docs.ts);
// what is put before or after it is what the reader's earlier steps set (a token, a key) and what
// the reader looks at afterwards. The README's "In a browser" block runs in client-browser.test.ts.
import { execFile } from 'node:child_process'
import { createHash, generateKeyPairSync } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import { tmpdir } from 'node:os'
import { basename, dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { runInNewContext } from 'node:vm'
import t from 'tap'
import { login, registerKey } from '#client'
import { compiled } from '../helpers/build.js'
import { docBlocks, docSnippet } from '../helpers/docs.js'
import { otherNode, packed } from '../helpers/packages.js'
import { addUser, PASSWORD, startStack } from '../helpers/stack.js'

t.setTimeout(180_000)

const root = fileURLToPath(new URL('../..', import.meta.url))
const run = promisify(execFile)
const README = 'client/README.md'
const SIGNING = 'docs/signing.md'
const RFC9421_README = 'RFC 9421 (`scheme: \'rfc9421\'`)'
const RFC9421_SIGNING = 'RFC 9421: HTTP Message Signatures'
const EXAMPLE_ORIGIN = 'https://api.example.com'

const scratch = mkdtempSync(join(tmpdir(), 'keygate-client-readme-'))
t.teardown(() => { rmSync(scratch, { recursive: true, force: true }) })
/** What the children see: nothing of this checkout (no NODE_OPTIONS, no keygate-source condition). */
const childEnv = { PATH: process.env.PATH ?? '', HOME: scratch }
/** npm with a cache of its own, no update check */
const npmEnv = { ...childEnv, npm_config_cache: join(scratch, 'npm-cache'), npm_config_update_notifier: 'false' }
/** the reader's project, where @keygate/client is installed by the first Install block */
const project = join(scratch, 'project')

const bash = async (script: string, cwd: string, env: Record<string, string>): Promise<{ stdout: string; stderr: string }> =>
  await run('bash', ['-euo', 'pipefail', '-c', script], { cwd, env, maxBuffer: 16 << 20 })

function emptyProject (dir: string): void {
  mkdirSync(dir, { recursive: true })
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: basename(dir), version: '1.0.0', private: true, type: 'module' }))
}

/** A package registry of one package, as npm asks one: the packument, then the tarball. */
async function oneTarballRegistry (tarball: string): Promise<{ url: string; asked: string[]; close: () => Promise<void> }> {
  const bytes = readFileSync(tarball)
  const { stdout } = await run('tar', ['-xzOf', tarball, 'package/package.json'])
  const manifest = JSON.parse(stdout) as { name: string; version: string }
  const asked: string[] = []
  const server: Server = createServer((req, res) => {
    const path = decodeURIComponent(new URL(req.url ?? '/', 'http://registry').pathname)
    asked.push(`${req.method ?? ''} ${path}`)
    if (path === `/${manifest.name}`) {
      const dist = {
        tarball: `${url}/${manifest.name}/-/${basename(tarball)}`,
        shasum: createHash('sha1').update(bytes).digest('hex'),
        integrity: `sha512-${createHash('sha512').update(bytes).digest('base64')}`
      }
      res.setHeader('content-type', 'application/json')
      res.end(JSON.stringify({ name: manifest.name, 'dist-tags': { latest: manifest.version }, versions: { [manifest.version]: { ...manifest, dist } } }))
    } else if (path === `/${manifest.name}/-/${basename(tarball)}`) {
      res.setHeader('content-type', 'application/octet-stream')
      res.end(bytes)
    } else {
      res.statusCode = 404
      res.end('{}')
    }
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}`
  return { url, asked, close: async () => { await new Promise((resolve) => server.close(resolve)) } }
}

let tarball = ''

t.test('client/README.md "Install": npm install @keygate/client, and the tarball of a keygate checkout', async (t) => {
  tarball = (await packed('@keygate/client')).path
  const [fromRegistry, fromCheckout] = docBlocks(README, 'Install', 'sh')
  t.ok(fromRegistry !== undefined && fromCheckout !== undefined, 'the section has its two blocks')

  // 1. The package is not on a registry yet ("Until the package is on a registry"): the command runs
  //    as written against a registry of this one package, the packed tarball, as npm's registry would serve it.
  const registry = await oneTarballRegistry(tarball)
  t.teardown(registry.close)
  emptyProject(project)

  // 2. In the keygate checkout: `npm ci` is not run here (the suite runs in an installed checkout);
  //    the build and the pack are those of the shared build (helpers/build.ts runs `npm run build`,
  //    whose first step is `npm run build -w @keygate/client`; helpers/packages.ts runs
  //    `npm pack -w @keygate/client` there). Checked: those commands, and the file the comment names.
  //    Then "in your project" runs as written, with the page's /path/to/ made the tarball's folder.
  const lines = (fromCheckout ?? '').split('\n')
  const inProject = lines.findIndex((line) => line.trim() === '# in your project')
  t.ok(inProject > 0, 'the block has its two parts')
  const checkoutCommands = lines.slice(0, inProject).map((line) => line.replace(/#.*$/, '').trim()).filter((line) => line !== '')
  t.same(checkoutCommands, ['npm ci', 'npm run build -w @keygate/client', 'npm pack -w @keygate/client'])
  const buildScript = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { scripts: { build: string } }).scripts.build
  t.ok(buildScript.startsWith('npm run build -w @keygate/client &&'), 'npm run build (the shared build) runs the same client build first')
  t.match(readFileSync(join(root, 'test/helpers/packages.ts'), 'utf8'), /\['pack',[^\n]*'-w', workspace\]/, 'packages.ts packs with npm pack -w')
  const named = /writes (\S+\.tgz)/.exec(fromCheckout ?? '')?.[1]
  t.equal(named, basename(tarball), `npm pack -w @keygate/client writes ${basename(tarball)}, the file the block names`)
  const yourProject = lines.slice(inProject + 1).join('\n')
  const script = yourProject.replaceAll(`/path/to/${named ?? ''}`, tarball)
  t.not(script, yourProject, 'the tarball\'s path is put in')
  const other = join(scratch, 'tarball-project')
  emptyProject(other)
  // the two installs, side by side
  await Promise.all([
    bash(fromRegistry ?? '', project, { ...npmEnv, npm_config_registry: `${registry.url}/` }),
    bash(script, other, { ...npmEnv, npm_config_offline: 'true', npm_config_cache: join(scratch, 'npm-cache-offline') })
  ])
  t.ok(registry.asked.includes('GET /@keygate/client'), 'npm asked the registry for @keygate/client')
  const installed = JSON.parse(readFileSync(join(project, 'node_modules/@keygate/client/package.json'), 'utf8')) as { version: string }
  t.equal(installed.version, '0.1.0', 'and installed it')
  const dependencies = (JSON.parse(readFileSync(join(project, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> }).dependencies
  t.same(dependencies, { '@keygate/client': '^0.1.0' }, 'as a dependency of the project')
  t.equal((JSON.parse(readFileSync(join(other, 'node_modules/@keygate/client/package.json'), 'utf8')) as { version: string }).version, '0.1.0',
    'npm install of the tarball installed @keygate/client')
})

/** A proxy as some sit in front of an API: it parses a JSON body and serialises it again, and sends keygate its own Host. */
async function reserialisingProxy (target: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = []
    req.on('data', (chunk: Buffer) => chunks.push(chunk))
    req.on('end', () => {
      let body: string | undefined = Buffer.concat(chunks).toString('utf8')
      if (body === '') body = undefined
      else if (/json/.test(req.headers['content-type'] ?? '')) body = JSON.stringify(JSON.parse(body))
      const headers: Record<string, string> = {}
      for (const [name, value] of Object.entries(req.headers)) {
        if (!['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive'].includes(name) && typeof value === 'string') headers[name] = value
      }
      fetch(`${target}${req.url ?? '/'}`, { method: req.method, headers, body }).then(async (answer) => {
        res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' })
        res.end(Buffer.from(await answer.arrayBuffer()))
      }, (err: Error) => { res.writeHead(502).end(err.message) })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    close: async () => { server.closeAllConnections(); await new Promise((resolve) => server.close(resolve)) }
  }
}

t.test('the README\'s and docs/signing.md\'s code blocks, as files of the reader\'s project, against a gateway', async (t) => {
  t.ok(existsSync(join(project, 'node_modules/@keygate/client')), 'the Install block installed the client')
  const gw = await startStack(t, { store: 'memory' })
  await Promise.all([addUser(gw, 'alice'), addUser(gw, 'bob')]) // a scrypt of 128 MiB each: side by side
  const baseUrl = gw.url
  // The reader's earlier steps: keys made and registered (README "Quick start"), tokens.
  const ed25519 = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  const p256 = generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
  const [{ token }, { token: bobToken }] = await Promise.all([
    login({ baseUrl, username: 'alice', password: PASSWORD }), login({ baseUrl, username: 'bob', password: PASSWORD })])
  const { apiKey } = await registerKey({ baseUrl, token, name: 'laptop', privateKey: ed25519 })
  await registerKey({ baseUrl, token, name: 'p256', privateKey: p256 })
  writeFileSync(join(project, 'private.pem'), ed25519)
  writeFileSync(join(project, 'p256.pem'), p256)
  const reader = { baseUrl, token, password: PASSWORD }
  /** the reader's file `name`, run by `node` in the project; its stdout */
  const node = async (name: string, text: string, nodePath = process.execPath, more: string[] = []): Promise<string> => {
    writeFileSync(join(project, name), text)
    const { stdout } = await run(nodePath, [name, JSON.stringify(reader), ...more], { cwd: project, env: childEnv })
    return stdout
  }
  /** what a file starts with: the values the reader's earlier steps set */
  const given = "import { readFileSync } from 'node:fs'\n" +
    'const { baseUrl, token, password } = JSON.parse(process.argv[2])\n' +
    "const privateKey = readFileSync('private.pem', 'utf8')\n"
  /** a fetch that records each request's headers and answer status, then the global one (for the blocks that show headers) */
  const recording = 'const sent = []\nconst realFetch = globalThis.fetch\n' +
    'globalThis.fetch = async (url, init = {}) => {\n' +
    '  const response = await realFetch(url, init)\n' +
    '  const body = init.body === undefined ? undefined : Buffer.from(init.body).toString()\n' +
    '  sent.push({ url: String(url), method: init.method, headers: Object.fromEntries(new Headers(init.headers)), body, status: response.status })\n' +
    '  return response\n}\n'

  t.test('"Quick start": run as written, as user demo with KEYGATE_PASSWORD, in a folder with its own private.pem', async (t) => {
    const block = docSnippet(README, 'Quick start', 'js')
    const script = block.replace("const baseUrl = 'http://127.0.0.1:8080'", `const baseUrl = '${baseUrl}'`)
    t.not(script, block, 'the gateway\'s URL in place of the page\'s :8080')
    await addUser(gw, 'demo')
    const dir = join(project, 'quick-start')
    mkdirSync(dir)
    writeFileSync(join(dir, 'private.pem'), generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey.export({ type: 'pkcs8', format: 'pem' }).toString())
    writeFileSync(join(dir, 'quick-start.js'), script)
    const unset = await run(process.execPath, ['quick-start.js'], { cwd: dir, env: childEnv }).then(() => '', (err: { stderr?: string }) => err.stderr ?? '')
    t.match(unset, /set KEYGATE_PASSWORD/, 'without KEYGATE_PASSWORD it says what to set')
    const { stdout } = await run(process.execPath, ['quick-start.js'], { cwd: dir, env: { ...childEnv, KEYGATE_PASSWORD: PASSWORD } })
    const [created, listed] = stdout.split(/\n(?=\d{3} )/)
    t.match(created, /^201 \{[\s\S]*name: 'Ada Lovelace'[\s\S]*tax_id: '12345678'/, 'the client is created (201) and printed')
    t.match(listed, /^200 \{[\s\S]*items: \[[\s\S]*name: 'Ada Lovelace'/, 'and listed (200), with a signed query string')
  })

  t.test('"CommonJS": require on Node.js 20.19+, and import() in an async function, both from a .cjs file', async (t) => {
    const block = docSnippet(README, 'CommonJS', 'js')
    // the reader's code goes where the block says // ...: a signed GET with the token and key of their earlier steps
    const withCode = block.replace(/^( *)\/\/ \.\.\.$/m,
      '$1return [typeof login, (await createClient({ baseUrl, token, privateKey }).fetch(\'GET\', \'/v1/clients/?limit=1\')).status]')
    t.not(withCode, block, 'the reader\'s code put in place of // ...')
    const file = "const { baseUrl, token } = JSON.parse(process.argv[2])\nconst privateKey = require('node:fs').readFileSync('private.pem', 'utf8')\n" +
      withCode + '\nmain().then(async (imported) => {\n' +
      "  const required = [typeof login, (await createClient({ baseUrl, token, privateKey }).fetch('GET', '/v1/clients/?limit=1')).status]\n" +
      '  console.log(JSON.stringify({ imported, required }))\n' +
      '}, (err) => { console.error(err); process.exitCode = 1 })\n'
    // the block's require is for Node.js 20.19+ and 22.12+ (and later): the other Node.js on PATH too, when it is one of those
    const older = await otherNode()
    const [major, minor] = (/^v(\d+)\.(\d+)\./.exec(older?.version ?? '') ?? []).slice(1).map(Number) as [number?, number?]
    const requires = major !== undefined && minor !== undefined && ((major === 20 && minor >= 19) || (major === 22 && minor >= 12) || major >= 23)
    const nodes = [process.execPath, ...(requires && older !== undefined ? [older.path] : [])]
    if (nodes.length === 1) t.pass(`NO other Node.js 20.19+ or 22.12+ on PATH (${older?.version ?? 'none'}): the block ran on ${process.version} only`)
    for (const nodePath of nodes) {
      const version = nodePath === process.execPath ? process.version : older?.version ?? ''
      const out = JSON.parse(await node('commonjs.cjs', file, nodePath)) as Record<string, unknown>
      t.same(out, { imported: ['function', 200], required: ['function', 200] },
        `Node.js ${version}: the required and the imported module each sign a GET that keygate accepts`)
    }
  })

  t.test(`"${RFC9421_README}": the POST is signed per RFC 9421 with the headers the comments show, and accepted`, async (t) => {
    const block = docSnippet(README, RFC9421_README, 'js')
    const pointed = block.replaceAll(`'${EXAMPLE_ORIGIN}'`, 'baseUrl')
    t.not(pointed, block, 'the example origin is the gateway\'s')
    const newClient = { name: 'Ada Lovelace', email: 'ada@example.com', tax_id: '31415926' }
    const out = await node('rfc9421.mjs', "import { createClient } from '@keygate/client'\n" + given + recording +
      `const newClient = ${JSON.stringify(newClient)}\n` + pointed + '\nconsole.log(JSON.stringify(sent))\n')
    const [post] = JSON.parse(out) as Array<{ method: string; headers: Record<string, string>; body: string; status: number }>
    t.equal(post?.method, 'POST')
    t.equal(post?.status, 201, 'keygate accepts it and the client is created')
    const digest = createHash('sha256').update(post?.body ?? '').digest('base64')
    t.equal(post?.body, JSON.stringify(newClient), 'the body sent is the JSON given')
    // each commented header, its placeholders made patterns (the signature, created, the nonce) or values (the apiKey, the digest)
    const shown = [...block.matchAll(/^\/\/ ([\w-]+): (.*)$/gm)]
    t.same(shown.map((m) => m[1]), ['Signature-Input', 'Signature', 'Content-Digest'], 'the comments show three headers')
    for (const [, name, value] of shown) {
      const pattern = (value ?? '').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
        .replace(/created=\d+/, 'created=\\d{10}')
        .replace('<apiKey>', apiKey)
        .replace('<base64 SHA-256 of the exact body bytes>', digest.replace(/[+/]/g, '\\$&'))
        .replace('<base64>', '[A-Za-z0-9+/]+=*')
        .replace('"\\.\\.\\."', '"[A-Za-z0-9_-]{22}"')
      t.match(post?.headers[(name ?? '').toLowerCase()], new RegExp(`^${pattern}$`), `${name ?? ''} is as the comment shows`)
    }
  })

  t.test('"DPoP: tokens bound to a key": the login answers a DPoP token, and a signed GET with its proof is accepted', async (t) => {
    const block = docSnippet(README, 'DPoP: tokens bound to a key', 'js')
    const [imports, ...rest] = block.split('\n')
    // in braces: the block's own token and client, beside the reader's earlier ones
    const out = await node('dpop.mjs', `${imports ?? ''}\n${given}${recording}{\n${rest.join('\n')}\n}\nconsole.log(JSON.stringify(sent))\n`)
    const [tokenType, status, sentJson] = out.trim().split('\n')
    t.equal(tokenType, 'DPoP', 'the login printed DPoP, as the comment shows')
    t.equal(status, '200', 'and the GET 200')
    const sent = JSON.parse(sentJson ?? '[]') as Array<{ url: string; headers: Record<string, string>; status: number }>
    t.match(sent.at(-1)?.headers, { authorization: /^DPoP /, dpop: /^[\w-]+\.[\w-]+\.[\w-]+$/ }, 'sent as the comment says: DPoP <token> and a proof')
  })

  t.test('"Errors": a wrong target is a SigningInputError, a wrong password a KeygateResponseError, with the values the comments show', async (t) => {
    const block = docSnippet(README, 'Errors', 'js')
    // each `err.member   // value` line prints the member; the comment is what the reader expects to see
    const expected: Array<{ member: string; comment: string }> = []
    const printing = block.replace(/^( *)err\.(\w+) +\/\/ (.*)$/gm, (_line, indent: string, member: string, comment: string) => {
      expected.push({ member, comment })
      return `${indent}console.log(JSON.stringify([${JSON.stringify(member)}, err.${member}]))`
    })
    t.same(expected.map((e) => e.member), ['input', 'message', 'status', 'code', 'problem'], 'the block shows five members')
    const out = await node('errors.mjs', "import { createClient, login } from '@keygate/client'\n" + given +
      "const username = 'alice'\nconst client = createClient({ baseUrl, token, privateKey })\n" + printing)
    const printed = out.trim().split('\n').map((line) => JSON.parse(line) as [string, unknown])
    t.same(printed.map(([member]) => member), expected.map((e) => e.member), 'each catch branch ran: every member printed, in order')
    for (const [index, { member, comment }] of expected.entries()) {
      const value = printed[index]?.[1]
      const literal = /^'([^']*)'|^(\d+)\b/.exec(comment)
      if (literal?.[1] !== undefined && literal[1].endsWith('...')) {
        t.ok(typeof value === 'string' && value.startsWith(literal[1].slice(0, -3)), `err.${member} starts as the comment shows: ${String(value)}`)
      } else if (literal?.[1] !== undefined) {
        t.equal(value, literal[1], `err.${member} is ${literal[1]}`)
      } else if (literal?.[2] !== undefined) {
        t.equal(value, Number(literal[2]), `err.${member} is ${literal[2]}`)
      } else {
        t.match(value, { status: 401, code: 'INVALID_CREDENTIALS', title: String }, `err.${member}: ${comment}`)
      }
    }
  })

  t.test('"Debugging an INVALID_SIGNATURE": behind a proxy that re-serialises bodies and rewrites Host, each block names what changed', async (t) => {
    const proxy = await reserialisingProxy(baseUrl)
    t.teardown(proxy.close)
    const [seed, rfc9421] = docBlocks(README, 'Debugging an INVALID_SIGNATURE', 'js')

    // The X-API-* headers: the body signed (pretty-printed JSON) is not the body that reaches keygate.
    const seedComment = /console\.log\(signatureMismatches\(mine, problem\)\) +\/\/ e\.g\. \[([^\]]*)\]/.exec(seed ?? '')?.[1] ?? ''
    const named = [...seedComment.matchAll(/'(\w+)'/g)].map((m) => m[1])
    t.same(named, ['bodyLength', 'bodySha256'], 'the comment names the body\'s members')
    const seedOut = await node('debug-seed.mjs', "import { apiKeyOf, describeRequest, signatureMismatches, signRequest } from '@keygate/client'\n" +
      given + 'const [proxyUrl] = process.argv.slice(3)\n' +
      "const method = 'POST'\nconst target = '/v1/clients/'\nconst url = proxyUrl + target\n" +
      "const body = JSON.stringify({ name: 'Grace Hopper', email: 'grace@example.com', tax_id: '27182818' }, null, 2)\n" +
      'const headers = { ...await signRequest({ method, target, body, apiKey: await apiKeyOf(privateKey), privateKey }), ' +
      "Authorization: 'Bearer ' + token, 'Content-Type': 'application/json' }\n" +
      `${seed ?? ''}\n`, process.execPath, [proxy.url])
    const mismatches = runInNewContext(`(${seedOut})`) as string[]
    t.ok(Array.isArray(mismatches), `it printed the list: ${seedOut.trim()}`)
    t.ok(named.every((name) => mismatches.includes(name as string)), 'the body\'s length and SHA-256 differ, as the comment says')
    t.notOk(mismatches.some((name) => ['method', 'target', 'timestamp'].includes(name)), 'and not what was not changed')

    // RFC 9421: the base signed for the origin the reader addressed (the proxy) is not the one keygate rebuilt (its own).
    const lines = (rfc9421 ?? '').split('\n')
    const shownLine = lines.find((line) => line.startsWith('// {')) ?? ''
    const mine = `${proxy.url}/v1/clients/`
    const keygate = `${baseUrl}/v1/clients/`
    const shown = shownLine.slice(3).replace(`${EXAMPLE_ORIGIN}/v1/clients/`, mine).replace('http://10.0.0.5:8080/v1/clients/', keygate)
    t.not(shown, shownLine.slice(3), 'the comment\'s origins made this test\'s')
    const rfcOut = await node('debug-rfc9421.mjs', "import { createClient, describeSignatureBase, signatureBaseMismatches } from '@keygate/client'\n" +
      given + 'const [proxyUrl] = process.argv.slice(3)\n' +
      "const apiKey = '" + apiKey + "'\n" +
      "const method = 'GET'\nconst target = '/v1/clients/'\nconst body = undefined\n" +
      "const sentTo = createClient({ baseUrl: proxyUrl, token, privateKey, scheme: 'rfc9421' })\n" +
      'const { response, headers } = await sentTo.send(method, target)\nconst problem = await response.json()\n' +
      "if (problem.code !== 'INVALID_SIGNATURE') throw new Error(JSON.stringify(problem))\n" +
      "const signatureInput = headers['signature-input']\n" +
      'const created = Number(/;created=(\\d+)/.exec(signatureInput)[1])\nconst nonce = /;nonce="([^"]+)"/.exec(signatureInput)[1]\n' +
      '{\n  const baseUrl = proxyUrl   // the origin the reader addressed\n' + `${rfc9421 ?? ''}}\n`, process.execPath, [proxy.url])
    t.same(runInNewContext(`(${rfcOut})`), runInNewContext(`(${shown})`),
      `the lines that differ are the @target-uri the reader signed and the one keygate saw, as the comment shows: ${rfcOut.trim()}`)
  })

  t.test(`docs/signing.md "${RFC9421_SIGNING}": the TypeScript block (run by Node.js, which strips types) and \`keygate call\``, async (t) => {
    const ts = docSnippet(SIGNING, RFC9421_SIGNING, 'ts')
    const pointed = ts.replaceAll(`'${EXAMPLE_ORIGIN}'`, 'baseUrl')
    t.not(pointed, ts, 'the example origin is the gateway\'s')
    // the key: P-256, one of the three the comment names
    const out = await node('signing.mts', given.replace("'private.pem'", "'p256.pem'") + recording + pointed + '\nconsole.log(JSON.stringify(sent))\n')
    const [post] = JSON.parse(out) as Array<{ method: string; headers: Record<string, string>; status: number }>
    t.equal(post?.status, 201, 'keygate accepts the POST and creates the client')
    const covered = /^\/\/ covers (.*)$/m.exec(ts)?.[1] ?? ''
    const [components, params] = covered.split(', with ')
    const signatureInput = post?.headers['signature-input'] ?? ''
    const coveredHere = /^sig1=\(([^)]*)\)/.exec(signatureInput)?.[1]?.split(' ').map((c) => c.replaceAll('"', '')).sort()
    t.same(coveredHere, [...(components ?? '').matchAll(/[@\w-]+(?=,| and|$)/g)].map((m) => m[0]).sort(),
      `it covers what the comment says: ${components ?? ''}`)
    const named = [...(params ?? '').matchAll(/\w+/g)].map((m) => m[0]).filter((w) => !['and', 'a'].includes(w))
    t.same([...signatureInput.matchAll(/;(\w+)=/g)].map((m) => m[1]).sort(), named.sort(), `with the parameters it names: ${params ?? ''}`)
    t.match(signatureInput, /alg="ecdsa-p256-sha256"/)

    // `npm run keygate -- call ...` on the compiled CLI, as bob (alice has a client of that tax_id now), with the key
    // `keygate keygen` and `register` would have made and a token (docs/cli.md: with KEYGATE_TOKEN, call does not log in)
    const sh = docSnippet(SIGNING, RFC9421_SIGNING, 'sh')
    const cli = `${JSON.stringify(process.execPath)} ${JSON.stringify(await compiled('gateway/src/cli/keygate.ts'))}`
    const script = sh.replaceAll('npm run keygate --', cli)
    t.not(script, sh, 'npm run keygate is the compiled CLI')
    const home = join(scratch, 'bob')
    mkdirSync(join(home, '.keygate'), { recursive: true, mode: 0o700 })
    const bobKey = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString()
    writeFileSync(join(home, '.keygate', 'default.pem'), bobKey, { mode: 0o600 })
    await registerKey({ baseUrl, token: bobToken, name: 'default', privateKey: bobKey })
    const env = { PATH: childEnv.PATH, HOME: home, KEYGATE_URL: baseUrl, KEYGATE_TOKEN: bobToken }
    const { stdout, stderr } = await bash(script, dirname(home), env)
    t.match(JSON.parse(stdout), { id: String, name: 'Ada', email: 'ada@example.com', tax_id: '12345678' }, 'it prints the created client')
    t.match(stderr, /^< 201 Created$/m, 'and the status')
    // -v: the signature base it signed
    const baseLines = ['"@method": POST', `"@target-uri": ${baseUrl}/v1/clients/`, '"content-digest": sha-256=:', '"content-type": application/json',
      '"@signature-params": (']
    for (const line of baseLines) {
      t.ok(stderr.includes(line), `-v prints the base's line ${line}...`)
    }
  })
})
