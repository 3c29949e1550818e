// The keygate package as an operator installs it, outside any checkout: `npm pack`, then
// `npm install --omit=dev` of the tarball in a new project. What runs is compiled JavaScript on
// plain node (no tsx, esbuild or TypeScript installed), and the `keygate` command on the PATH
// serves a backend, handles its own signals, and answers --help, --version and typos. The
// commands are docs/getting-started.md's block under "The package and the `keygate` command".
import { execFile } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { packedSizes } from '../../scripts/package-sizes.js'
import { docPage, docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { exitOn, interruptGroup, portAnswers, startCommand } from '../helpers/listening.js'
import { builtCheckout } from '../helpers/build.js'
import { installInScratch, packed } from '../helpers/packages.js'
import { checkPortalServed } from '../helpers/portal-files.js'
import { login, registerKey, sendSigned, startUpstreamStub } from '../helpers/stack.js'

const run = promisify(execFile)

t.test('the packed keygate installs with --omit=dev and its keygate command fronts a backend', async (t) => {
  const block = docSnippet('docs/getting-started.md', 'The package and the `keygate` command', 'sh')
  const commands = block.split('\n').map((line) => line.replace(/#.*$/, '').trim()).filter(Boolean)
  t.equal(commands.length, 3, 'pack, install, serve')
  // `npm pack` (packages.ts: in the build's copy of the checkout, npm run build done already)
  t.equal(commands[0], 'npm pack')
  const { path: tarball, files } = await packed()
  t.equal(basename(tarball), /then (keygate-[\d.]+\.tgz)/.exec(block)?.[1], 'the tarball the page names')
  t.same(files.filter((f) => /\.ts$|^test\/|\.map$/.test(f)), [], 'no TypeScript sources, no tests in the tarball')
  t.ok(files.includes('dist/gateway/src/cli/keygate.js'), 'the compiled CLI is in it')
  t.ok(files.includes('bin/keygate.js'), 'and the command that runs it (package.json bin)')
  t.ok(files.includes('dist/client/src/protocol/index.js'), 'and the protocol code the gateway imports, compiled in')
  t.ok(files.includes('dist/portal/index.html'), 'and the developer portal, bundled')
  // what npm run package-sizes prints (the docs quote no size): the tarballs' own, to the byte
  const [keygateSize, clientSize] = await packedSizes(await builtCheckout())
  t.match(keygateSize, { filename: basename(tarball), size: statSync(tarball).size, files: files.length }, 'package-sizes: the keygate tarball')
  const client = await packed('@keygate/client')
  t.match(clientSize, { filename: basename(client.path), size: statSync(client.path).size, files: client.files.length }, 'package-sizes: the client\'s')

  // `npm install --omit=dev /path/to/keygate-0.1.0.tgz`: installInScratch runs npm install with
  // these flags and the tarball (and --no-audit --no-fund --prefer-offline, which change no file)
  const install = commands[1]?.replace(/\/path\/to\/(keygate-[\d.]+\.tgz)$/, (_, name: string) => join(dirname(tarball), name)) ?? ''
  t.not(install, commands[1], 'the path filled in')
  const [npm, verb, ...rest] = install.split(' ')
  t.same([npm, verb, rest.at(-1)], ['npm', 'install', tarball])
  const project = await installInScratch(t, tarball, rest.slice(0, -1))
  const installed = readdirSync(join(project, 'node_modules'))
  // the page's "N packages, M MB": what this install put in node_modules (keygate included), as npm's lock of it lists
  // them, and the size of their files added up
  const lock = JSON.parse(readFileSync(join(project, 'node_modules', '.package-lock.json'), 'utf8')) as { packages: Record<string, unknown> }
  const count = Object.keys(lock.packages).filter((path) => path.startsWith('node_modules/')).length
  const bytes = readdirSync(join(project, 'node_modules'), { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile()).reduce((sum, entry) => sum + statSync(join(entry.parentPath, entry.name)).size, 0)
  const [, pageCount, pageMb] = /: (\d+) packages, (\d+) MB \(/.exec(docPage('docs/getting-started.md')) ?? []
  t.equal(count, Number(pageCount), `the page's package count (${count} installed)`)
  const mb = bytes / 1e6
  t.ok(Math.abs(mb - Number(pageMb)) <= Number(pageMb) * 0.1, `the page's size within 10% (${mb.toFixed(1)} MB installed, the page says ${pageMb ?? ''})`)
  for (const devOnly of ['tsx', 'esbuild', 'typescript', '@keygate', 'tap']) {
    t.notOk(installed.includes(devOnly), `${devOnly} is not installed`)
  }
  const bin = join(project, 'node_modules', '.bin', 'keygate')
  t.ok(existsSync(bin), 'npm put a keygate command in node_modules/.bin')
  const env = { PATH: `${join(project, 'node_modules', '.bin')}:${process.env.PATH ?? ''}` }

  const version = await run('keygate', ['--version'], { cwd: project, env })
  t.equal(version.stdout, 'keygate 0.1.0\n', '--version')
  // the quickest of three runs: a moment of load on a shared machine slows one run, not all three
  const runs: number[] = []
  let help = { stdout: '' }
  for (let i = 0; i < 3; i++) {
    const started = process.hrtime.bigint()
    help = await run('keygate', ['--help'], { cwd: project, env })
    runs.push(Number(process.hrtime.bigint() - started) / 1e6)
  }
  const helpMs = Math.min(...runs)
  t.match(help.stdout, /^usage: keygate serve\n {7}keygate demo\n/, '--help names the installed command')
  t.ok(helpMs < 1000, `--help answers in well under a second (quickest of three: ${helpMs.toFixed(0)} ms)`)
  const typo = await run('keygate', ['serv'], { cwd: project, env }).catch((err: { code: number; stdout: string; stderr: string }) => err)
  t.match(typo, { code: 2, stdout: '' })
  t.match(typo.stderr, /^keygate: unknown command "serv"; did you mean "serve"\? \(keygate --help lists them\)\n$/, 'a typo: one line with the nearest command')
  const bench = await run('keygate', ['bench'], { cwd: project, env }).catch((err: { code: number; stderr: string }) => err)
  t.match(bench, { code: 1 })
  t.match(bench.stderr, /not installed/, 'keygate bench says the load tool is not part of a production install')
  // hints name the installed command (the checkout's is npm run keygate --: test/unit/gateway/lib/command-name.test.ts)
  const home = join(project, 'home')
  mkdirSync(home)
  const keygen = await run('keygate', ['keygen', '--out', join(home, 'keys')], { cwd: project, env: { ...env, HOME: home } })
  t.match(keygen.stdout, /^next: {8}keygate register --key /m, 'keygen names the next step with the keygate command')
  const noKey = await run('keygate', ['call', 'GET', '/v1/clients/'], { cwd: project, env: { ...env, HOME: home } })
    .catch((err: { code: number; stdout: string; stderr: string }) => err)
  t.match(noKey, { code: 2, stdout: '' })
  t.match(noKey.stderr, /^no private key at .*: make one with `keygate keygen`/, 'call without a key says how to make one, with the keygate command')

  const upstreamUrl = await startUpstreamStub(t)
  // the page's serve line, its example backend (port 3000) this test's; PORT=0: a free port
  const serve = commands[2]?.replace('UPSTREAM_URL=http://127.0.0.1:3000 ', `UPSTREAM_URL=${upstreamUrl} `) ?? ''
  t.not(serve, commands[2], 'the backend\'s URL filled in')
  const gw = await startCommand('bash', ['-c', serve], env, project, { detached: true })
  t.teardown(() => { try { process.kill(-(gw.child.pid as number), 'SIGKILL') } catch {} })
  t.match(gw.stdout(), /keygate listens on http:\/\/127\.0\.0\.1:\d+/, 'npx keygate serve logs its startup line')
  const bootstrap = /KEYGATE_BOOTSTRAP_USERS='alice:([^']+)'/.exec(serve)?.[1] ?? ''
  const token = await login(gw.url, 'alice', bootstrap)
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201, 'a key registers')
  const body = JSON.stringify({ name: 'Ada', email: 'ada@example.com', tax_id: '12345678' })
  const created = await sendSigned(gw.url, { keys, token, method: 'POST', target: '/v1/clients/', body })
  t.equal(created.status, 201, 'a signed POST goes through to the backend')
  const { id } = created.json<{ id: string }>()
  const read = await sendSigned(gw.url, { keys, token, method: 'GET', target: `/v1/clients/${id}` })
  t.equal(read.status, 200)
  t.match(read.json(), { id, name: 'Ada' }, 'and reads back what the backend stored')
  t.equal((await send(gw.url, `/v1/clients/${id}`, { headers: { authorization: `Bearer ${token}` } })).status, 401, 'unsigned: refused')
  await checkPortalServed(t, gw.url)
  // npm does not pass SIGTERM on to what it runs (a supervisor must run the command itself, below);
  // in a terminal, Ctrl-C reaches the whole process group, the gateway included.
  await interruptGroup(gw.child)
  t.match(gw.stdout(), /SIGINT: shutting down/, 'Ctrl-C on npx keygate serve: the gateway shuts down (npm\'s own exit code is npm\'s)')
  t.equal(await portAnswers(gw.url), false, 'and its port is free')

  // What a supervisor starts: the command itself, with no npm in between.
  const direct = await startCommand(bin, ['serve'], { PATH: process.env.PATH ?? '' }, project)
  t.teardown(() => { direct.child.kill('SIGKILL') })
  t.equal((await send(direct.url, '/healthz')).status, 200)
  t.equal(await exitOn(direct.child, 'SIGTERM'), 0, 'SIGTERM to the keygate command: exit code 0')
  t.equal(await portAnswers(direct.url), false, 'and its port is free')
})
