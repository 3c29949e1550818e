// The Docker image, assembled as `docker build` would (no Docker engine here): the build stage's
// COPY lines from this checkout and its `npm run build` (helpers/build.ts: the shared build is
// made that way, then the rest of the checkout is copied in; it keeps the stage's tree as the
// build left it), then the runtime stage's COPY lines (from the checkout and from the build
// stage) and its `npm ci --omit=dev`, into a folder outside the repository. Its CMD and the
// compose file's upstream command then run on plain node: what the image holds is enough for
// them, and holds no TypeScript tooling.
import { spawn, execFile } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { parse } from 'yaml'
import { dockerBuildStage, dockerBuildStageOf } from '../helpers/build.js'
import { copyStage, dockerStages, execForm, workdirOf, type Stage } from '../helpers/dockerfile.js'
import { rsaKeyPair } from '../helpers/keys.js'
import { exitOn, portAnswers, startCommand } from '../helpers/listening.js'
import { checkPortalServed } from '../helpers/portal-files.js'
import { login, PASSWORD, registerKey, sendSigned } from '../helpers/stack.js'

const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const run = promisify(execFile)

function scratch (t: { teardown: (fn: () => unknown) => void }, label: string): string {
  const dir = mkdtempSync(join(tmpdir(), `keygate-image-${label}-`))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  return dir
}

t.test('the image as docker build assembles it: its CMD and the upstream command run compiled code', async (t) => {
  const [build, runtime] = dockerStages() as [Stage, Stage]

  // build stage: its own COPY lines, then npm run build; the install it runs is this checkout's
  // (npm ci, linked): made by the shared build, which is built this way (helpers/build.ts)
  t.ok(build.all('RUN').some((i) => i.args === 'npm run build'))
  t.equal(dockerBuildStageOf()?.name, build.name, 'the shared build lays out and builds this stage')
  const buildDir = await dockerBuildStage()
  t.ok(existsSync(join(buildDir, 'dist/gateway/src/main.js')), 'the build stage compiles the gateway from what it copies')

  // runtime stage
  const appDir = scratch(t, 'app')
  copyStage(runtime, appDir, { [build.name ?? '']: { dir: buildDir, workdir: workdirOf(build) } })
  const install = runtime.all('RUN').map((i) => /npm ci [^&]*/.exec(i.args)?.[0]).find((c) => c !== undefined)
  t.ok(install?.includes('--omit=dev'), `the runtime stage installs production dependencies (${install})`)
  await run('npm', [...(install ?? '').trim().split(/\s+/).slice(1), '--prefer-offline'], { cwd: appDir, maxBuffer: 16 << 20 })
  const installed = readdirSync(join(appDir, 'node_modules'))
  for (const devOnly of ['tsx', 'esbuild', 'typescript', 'tap']) t.notOk(installed.includes(devOnly), `no ${devOnly} in the image`)
  const sources = readdirSync(appDir, { recursive: true, encoding: 'utf8' }).filter((f) => !f.startsWith('node_modules') && /(?<!\.d)\.ts$/.test(f))
  t.same(sources, [], 'and no TypeScript sources')

  const imageEnv = Object.fromEntries(runtime.all('ENV').flatMap((i) => i.args.split(/\s+/).map((pair) => pair.split('=') as [string, string])))
  t.equal(imageEnv.NODE_ENV, 'production')
  // the compose file's upstream service: the same image, another command
  const compose = parse(readFileSync(join(ROOT, 'docker-compose.yml'), 'utf8')) as { services: Record<string, { command?: string[] }> }
  const [upNode, ...upArgs] = compose.services.upstream?.command ?? []
  t.equal(upNode, 'node')
  const upstream = spawn(process.execPath, upArgs, { cwd: appDir, env: { PATH: process.env.PATH ?? '', ...imageEnv, HOST: '127.0.0.1', UPSTREAM_PORT: '0' } })
  t.teardown(() => { upstream.kill('SIGKILL') })
  const upstreamUrl = await new Promise<string>((resolve, reject) => {
    let out = ''
    upstream.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const match = /listening at (http:\/\/[0-9.:]+)/.exec(out)
      if (match !== null) resolve(match[1] as string)
    })
    upstream.on('exit', (code) => { reject(new Error(`the upstream command exited with ${code}`)) })
  })

  const argv = execForm(runtime.all('CMD').at(-1)?.args) ?? []
  t.equal(argv[0], 'node')
  const gw = await startCommand(process.execPath, argv.slice(1), {
    ...imageEnv, HOST: '127.0.0.1', PORT: '0', UPSTREAM_URL: upstreamUrl, KEYGATE_BOOTSTRAP_USERS: `alice:${PASSWORD}`
  }, appDir)
  t.teardown(() => { gw.child.kill('SIGKILL') })
  const token = await login(gw.url, 'alice')
  const keys = rsaKeyPair()
  t.equal((await registerKey(gw.url, token, keys)).status, 201)
  const created = await sendSigned(gw.url, {
    keys, token, method: 'POST', target: '/v1/clients/', body: JSON.stringify({ name: 'Ada', email: 'ada@example.com', tax_id: '12345678' })
  })
  t.equal(created.status, 201, 'a signed request goes through the image\'s gateway to the image\'s upstream service')
  await checkPortalServed(t, gw.url)
  t.equal(await exitOn(gw.child, 'SIGTERM'), 0, 'SIGTERM: exit code 0')
  t.equal(await portAnswers(gw.url), false)
})
