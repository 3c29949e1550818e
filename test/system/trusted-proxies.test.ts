// keygate behind a real nginx (Debian's, installed when missing), as issue #12 found it: every
// client arrives from nginx's address, so one client's failed logins for made-up users lock
// every client out, and upstreams see nginx's address in X-Forwarded-For. The gateway runs as a
// process configured by its environment; clients are on their own loopback addresses (Linux
// routes all of 127/8 to lo), nginx reaches keygate from 127.0.0.1.
//
// With KEYGATE_TRUSTED_PROXIES=127.0.0.1, each client has its own login budget and the upstream
// gets the chain; without it, the lockout of everyone is shown; and a client that goes around
// nginx cannot choose its address with a forged X-Forwarded-For. The settings are
// docs/load-balancer.md's block under "Trusted proxies", read from the page, with its example
// balancer addresses made this machine's (nginx's address, and a loopback range).
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { blockSettings, docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { findNginx, startNginx } from '../helpers/nginx.js'
import { redisEnv, spawnGateway, type Gateway } from '../helpers/process-tree.js'
import { startRecorder, type Recorder } from '../helpers/recorder.js'
import { PASSWORD } from '../helpers/stack.js'

t.setTimeout(600_000)

const NGINX = '127.0.0.1'
const CLIENT_A = '127.0.0.2'
const CLIENT_B = '127.0.0.3'
const DIRECT = '127.0.0.4'
/** failed logins per client address before 429 (the default is 100; each failure costs a scrypt) */
const BUDGET = 3

const nginx = findNginx()
const skip = 'reason' in nginx ? `nginx cannot be installed here: ${nginx.reason}` : false

interface Deployment { gateway: Gateway; url: string; nginxUrl: string; recorder: Recorder }

/** keygate (a process, on Redis) with a public route to a recorder, and nginx in front of it. */
async function deploy (t: Test, env: Record<string, string>): Promise<Deployment> {
  if ('reason' in nginx) throw new Error(nginx.reason)
  const recorder = await startRecorder(t)
  const dir = await mkdtemp(join(tmpdir(), 'keygate-proxies-'))
  t.teardown(async () => { await rm(dir, { recursive: true, force: true }) })
  const routes = join(dir, 'routes.json')
  await writeFile(routes, JSON.stringify({ routes: [{ prefix: '/echo/', upstream: recorder.url, auth: 'public' }] }))
  const gateway = spawnGateway(t, {
    ...await redisEnv(t, 'proxies'),
    KEYGATE_ROUTES: routes,
    KEYGATE_LOGIN_MAX_FAILURES_PER_ADDRESS: String(BUDGET),
    // the login budget's windows are fixed (15 min by default, from the epoch): a day's window keeps the
    // sequence's 4 attempts in one window whenever the test runs (it failed once at 03:45:00 UTC)
    KEYGATE_LOGIN_WINDOW_SECONDS: '86400',
    ...env
  })
  const ready = await gateway.waitForLine((l) => /^keygate listens on /.test(l.msg), 'saying it listens')
  const url = /^keygate listens on (http:\/\/\S+) /.exec(ready.msg)?.[1] ?? ''
  const proxy = await startNginx(t, nginx.path, url)
  return { gateway, url, nginxUrl: proxy.url, recorder }
}

async function loginStatus (url: string, localAddress: string, username: string, password: string, headers: Record<string, string> = {}): Promise<number> {
  const res = await send(url, '/v1/auth/token', {
    method: 'POST',
    localAddress,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ username, password })
  })
  return res.status
}

/** Client A spends its budget on made-up users, then tries once more; client B logs in as alice. */
async function lockoutSequence (t: Test, { nginxUrl }: Deployment): Promise<{ a: number; b: number }> {
  for (let i = 1; i <= BUDGET; i++) {
    t.equal(await loginStatus(nginxUrl, CLIENT_A, `made-up-${i}`, 'guess'), 401, `client A, failed login ${i} of ${BUDGET}`)
  }
  return {
    a: await loginStatus(nginxUrl, CLIENT_A, 'made-up-next', 'guess'),
    b: await loginStatus(nginxUrl, CLIENT_B, 'alice', PASSWORD)
  }
}

async function accessLogIp (gateway: Gateway, requestId: string | string[] | undefined): Promise<unknown> {
  return (await gateway.waitForLine((l) => l.msg === 'request' && l.reqId === requestId, `for request ${String(requestId)}`)).ip
}

/** the page's settings, its balancers here: nginx's address, and a range the clients are not in */
function pageSettings (t: Test): Record<string, string> {
  const block = docSnippet('docs/load-balancer.md', 'Trusted proxies', 'sh')
  const settings = blockSettings(block.replace('KEYGATE_TRUSTED_PROXIES=10.0.0.5,10.0.1.0/24', `KEYGATE_TRUSTED_PROXIES=${NGINX},127.0.1.0/24`))
  t.same(settings, { KEYGATE_TRUSTED_PROXIES: `${NGINX},127.0.1.0/24`, KEYGATE_TRUSTED_PROXY_HEADER: 'x-forwarded-for' },
    'the page\'s two settings, its example addresses replaced')
  return settings
}

t.test(`with KEYGATE_TRUSTED_PROXIES=${NGINX} behind nginx, as docs/load-balancer.md sets it`, { skip }, async (t) => {
  const deployment = await deploy(t, pageSettings(t))
  const { gateway, url, nginxUrl, recorder } = deployment

  t.test('one client over its failed-login budget gets 429; another client still logs in', async (t) => {
    const { a, b } = await lockoutSequence(t, deployment)
    t.equal(a, 429, 'client A: 429 RATE_LIMITED')
    t.equal(b, 200, 'client B, behind the same nginx: logged in')
  })

  t.test('the upstream gets the chain: the client, then nginx', async (t) => {
    const res = await send(nginxUrl, '/echo/a', { localAddress: CLIENT_A })
    t.equal(res.status, 200)
    const seen = recorder.requests.at(-1)?.headers ?? {}
    t.equal(seen['x-forwarded-for'], `${CLIENT_A}, ${NGINX}`)
    t.equal(seen['x-forwarded-proto'], 'http', 'nginx\'s X-Forwarded-Proto, passed on')
    t.equal(await accessLogIp(gateway, res.headers['x-request-id']), CLIENT_A, 'the access log names client A')

    const spoofing = await send(nginxUrl, '/echo/b', { localAddress: CLIENT_A, headers: { 'x-forwarded-for': '10.9.9.9' } })
    t.equal(spoofing.status, 200)
    t.equal(recorder.requests.at(-1)?.headers['x-forwarded-for'], `10.9.9.9, ${CLIENT_A}, ${NGINX}`,
      'what client A sent itself stays in the chain, left of what nginx appended')
    t.equal(await accessLogIp(gateway, spoofing.headers['x-request-id']), CLIENT_A, 'but client A is the client, not 10.9.9.9')
  })

  t.test('a client that goes around nginx is not believed', async (t) => {
    const res = await send(url, '/echo/direct', {
      localAddress: DIRECT,
      headers: { 'x-forwarded-for': '1.2.3.4', 'x-forwarded-proto': 'https', forwarded: 'for=1.2.3.4' }
    })
    t.equal(res.status, 200)
    const seen = recorder.requests.at(-1)?.headers ?? {}
    t.equal(seen['x-forwarded-for'], DIRECT, 'X-Forwarded-For upstream: its own address, alone')
    t.notOk('x-forwarded-proto' in seen || 'forwarded' in seen, 'none of its forwarding headers')
    t.equal(await accessLogIp(gateway, res.headers['x-request-id']), DIRECT, 'the access log names its own address')
    t.equal(await loginStatus(url, DIRECT, 'made-up-direct', 'guess', { 'x-forwarded-for': CLIENT_A }), 401,
      'naming client A\'s locked-out address does not make it client A: its own budget, 401')
  })
})

t.test('without KEYGATE_TRUSTED_PROXIES behind nginx (the bug, shown)', { skip }, async (t) => {
  const deployment = await deploy(t, {})
  const { a, b } = await lockoutSequence(t, deployment)
  t.equal(a, 429, 'client A: 429')
  t.equal(b, 429, 'client B is locked out too: to keygate both are nginx')
  const res = await send(deployment.nginxUrl, '/echo/', { localAddress: CLIENT_B })
  t.equal(deployment.recorder.requests.at(-1)?.headers['x-forwarded-for'], NGINX, 'the upstream sees nginx\'s address')
  t.equal(await accessLogIp(deployment.gateway, res.headers['x-request-id']), NGINX, 'and so does the access log')
})
