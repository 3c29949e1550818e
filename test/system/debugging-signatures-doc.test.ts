// Every block of docs/debugging-signatures.md run as a reader runs it, read from the page
// (test/helpers/docs.ts), against one real gateway whose clock is the page's ("with its clock set
// to ..."), with the page's test key registered. Each mistake's block (Python with requests, a
// shell line with openssl, a JavaScript line) makes its request, and keygate's answer must be the
// one its section shows: the status, the media type and the JSON, member for member. The reader's
// side of the comparison ("Debugging INVALID_SIGNATURE": the sh lines, the ts lines with
// @keygate/client) must compute what the sections' tables say the reader signed.
//
// What a reader adds to a block, and nothing more: the values earlier steps set ($BASE, $TOKEN,
// $API_KEY, $TS in milliseconds; private.pem, and old-private.pem for mistake 5; `data`, `url`,
// `ts` and `sign` for the Python and JavaScript lines), then the request the block's signature is
// for. The shell blocks stop at `SIG=...`, so each is followed by the curl that sends it. In the
// Python block, `headers=...` is the one elision the reader fills in (the headers of the request).
// The ts block's bare expressions are printed, as a REPL shows them.
// (test/unit/gateway/auth/signature-debugging.test.ts writes the sections' answers and tables.)
import { execFile, spawnSync } from 'node:child_process'
import { createPrivateKey, sign } from 'node:crypto'
import { copyFileSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t, { type Test } from 'tap'
import { installedWithApt } from '../helpers/apt.js'
import { docBlocks, docSection, docSnippet } from '../helpers/docs.js'
import { send } from '../helpers/http.js'
import { TYPESCRIPT_NODE_ARGS } from '../helpers/typescript-node.js'
import { testKeyPairOf } from '../helpers/keys.js'
import { addUser, login, registerKey, startStack } from '../helpers/stack.js'

const run = promisify(execFile)
const ROOT = fileURLToPath(new URL('../..', import.meta.url))
const PAGE = 'docs/debugging-signatures.md'
const TITLE = 'Debugging INVALID_SIGNATURE'
const MISTAKE = {
  json: '1. Re-serialised JSON',
  newline: '2. A trailing newline',
  seconds: '3. Seconds instead of milliseconds',
  query: '4. The query string left out',
  wrongKey: '5. The wrong key pair',
  lineBroken: '6. A signature broken over lines',
  formBody: '7. A body that starts like a target (not a signature mistake)'
}
const FIXTURES = new URL('../fixtures/debugging-guide/', import.meta.url)
const registered = createPrivateKey(readFileSync(new URL('registered.pem', FIXTURES)))
const API_KEY = testKeyPairOf(registered).apiKey

/** The gateway's clock, as the page says its answers were made. */
const CLOCK = Number(/with its clock set to `(\d{13})`/.exec(docSection(PAGE, TITLE))?.[1])

/** The blocks of `lang` before the first mistake's section: the reader's side of the comparison. */
function introBlock (lang: string): string {
  const inSections = new Set(Object.values(MISTAKE).flatMap((heading) => docBlocks(PAGE, heading, lang)))
  const intro = docBlocks(PAGE, TITLE, lang).filter((block) => !inSections.has(block))
  if (intro.length !== 1) throw new Error(`${PAGE}, "${TITLE}": ${intro.length} \`\`\`${lang} blocks above the mistakes (expected one)`)
  return intro[0] as string
}

interface Shown { status: number; contentType: string; closes: boolean; answer: Record<string, unknown>; table: Map<string, string> }

/** What a section says keygate answers: the line above its JSON, the JSON, and "You signed" of its table. */
function shown (heading: string): Shown {
  const section = docSection(PAGE, heading)
  const line = /^keygate answers `(\d{3})`, `([^`]+)`(, and closes the connection)?:$/m.exec(section)
  if (line === null) throw new Error(`${PAGE}, "${heading}": no "keygate answers ..." line`)
  const table = new Map([...section.matchAll(/^\| `(\w+)` \| `([^`]*)` \| `[^`]*` \| (?:same|\*\*differs\*\*) \|$/gm)]
    .map((row) => [row[1] as string, row[2] as string]))
  return {
    status: Number(line[1]),
    contentType: line[2] as string,
    closes: line[3] !== undefined,
    answer: JSON.parse(docSnippet(PAGE, heading, 'json')) as Record<string, unknown>,
    table
  }
}

/** the Pythons a reader may have, and how one says it has requests: its own path */
const PYTHONS = ['python3', '/usr/bin/python3']
const PYTHON_PROBE = ['-c', 'import sys, requests; print(sys.executable)']

interface Answer { status: number; contentType: string; connection: string | undefined; answer: Record<string, unknown> }

t.test('every block of the page, run against a gateway: keygate answers as each section shows', async (t) => {
  t.ok(CLOCK > 1e12, 'the page names the gateway\'s clock, in milliseconds')
  // Python with requests, looked for while the gateway starts: the interpreter itself (a version
  // manager's shim costs a second a run on a busy machine), else installed from Debian's packages
  const pythonFound = Promise.all(PYTHONS.map(async (program) =>
    await run(program, PYTHON_PROBE, { timeout: 30_000 }).then(({ stdout }) => stdout.trim(), () => undefined)))
    .then((found) => found.find((path) => path !== undefined))

  const gw = await startStack(t, { store: 'memory', now: () => CLOCK })
  await addUser(gw, 'ada')
  const token = await login(gw.url, 'ada')
  const registration = await registerKey(gw.url, token, testKeyPairOf(registered), 'laptop')
  t.equal(registration.status, 201, registration.text)
  const found = await pythonFound
  const python = found === undefined
    ? installedWithApt('python3 with requests', () => PYTHONS.map((program) => spawnSync(program, PYTHON_PROBE, { encoding: 'utf8' }))
      .find((probe) => probe.status === 0)?.stdout.trim(), ['python3-requests'])
    : { path: found }
  if ('reason' in python) throw new Error(`This test needs ${python.reason}`)

  // The reader's folder: the registered key as private.pem, another as old-private.pem (mistake 5).
  const dir = mkdtempSync(join(tmpdir(), 'keygate-debugging-'))
  t.teardown(() => { rmSync(dir, { recursive: true, force: true }) })
  copyFileSync(new URL('registered.pem', FIXTURES), join(dir, 'private.pem'))
  copyFileSync(new URL('other.pem', FIXTURES), join(dir, 'old-private.pem'))
  const env = { PATH: process.env.PATH ?? '', HOME: dir, LC_ALL: 'C', BASE: gw.url, TOKEN: token, API_KEY, TS: String(CLOCK) }

  const bash = async (script: string, more: Record<string, string> = {}): Promise<string> =>
    (await run('bash', ['-c', script], { cwd: dir, env: { ...env, ...more }, timeout: 20_000 })).stdout

  /** A shell block, then the curl that sends the request its $SIG is for; keygate's answer. */
  async function curled (block: string, method: string, target: string, body?: { type: string }): Promise<Answer & { ts: string; sig: string }> {
    const request = [
      'printf %s "$TS" > ts.txt; printf %s "$SIG" > sig.txt',
      `curl -sS --max-time 10 -D head.txt -o answer.json -X ${method} "$BASE${target}" -H "Authorization: Bearer $TOKEN" ` +
        '-H "X-API-Key: $API_KEY" -H "X-API-Timestamp: $TS" -H "X-API-Signature: $SIG"' +
        (body === undefined ? '' : ` -H 'Content-Type: ${body.type}' --data-binary "$BODY"`)
    ].join('\n')
    await bash(`${block}\n${request}\n`)
    const head = readFileSync(join(dir, 'head.txt'), 'latin1')
    const header = (name: string): string | undefined => new RegExp(`^${name}: *(.*?)\\r?$`, 'im').exec(head)?.[1]
    return {
      status: Number(/^HTTP\/1\.1 (\d{3})/.exec(head)?.[1]),
      contentType: header('content-type') ?? '',
      connection: header('connection'),
      answer: JSON.parse(readFileSync(join(dir, 'answer.json'), 'utf8')) as Record<string, unknown>,
      ts: readFileSync(join(dir, 'ts.txt'), 'utf8'),
      sig: readFileSync(join(dir, 'sig.txt'), 'utf8')
    }
  }

  function answersAsShown (t: Test, heading: string, got: Answer): Shown {
    const page = shown(heading)
    t.equal(got.status, page.status, `${heading}: the status the page shows`)
    t.equal(got.contentType, page.contentType, `${heading}: the media type the page shows`)
    t.same(got.answer, page.answer, `${heading}: the answer the page shows, member for member`)
    if (page.closes) t.equal(got.connection, 'close', `${heading}: and keygate closes the connection, as the page says`)
    return page
  }

  /** The intro's shell lines, with what the reader signed: the SHA-256 of it and of the body, the body's length, the key's apiKey. */
  interface ReaderSide { signingStringSha256: string; bodySha256: string; bodyLength: string; apiKey: string }
  async function readerSide (t: Test, signingString: string, body: string): Promise<ReaderSide> {
    const out = await bash(introBlock('sh'), { SIGNING_STRING: signingString, BODY: body })
    const hashes = [...out.matchAll(/[0-9a-f]{64}/g)].map((m) => m[0])
    t.equal(hashes.length, 3, 'three hashes: the signing string, the body, the key')
    return {
      signingStringSha256: hashes[0] ?? '',
      bodySha256: hashes[1] ?? '',
      bodyLength: /^\s*(\d+)\s*$/m.exec(out)?.[1] ?? '',
      apiKey: hashes[2] ?? ''
    }
  }

  t.test(MISTAKE.json, async (t) => {
    const block = docSnippet(PAGE, MISTAKE.json, 'python')
    // the one elision: the request's headers
    const filled = block.replace('headers=...', 'headers=headers_of(signature)')
    t.not(filled, block, 'the block sends headers=..., which the reader fills in')
    const prelude = [
      'import base64, json, os, subprocess',
      'import requests',
      'data = {"name": "Ada Lovelace", "email": "ada@example.com", "tax_id": "12345678"}',
      'ts = os.environ["TS"]',
      'url = os.environ["BASE"] + "/v1/clients/"',
      'def sign(text):  # RSA PKCS#1 v1.5 with SHA-256, as openssl dgst -sha256 -sign',
      '    der = subprocess.run(["openssl", "dgst", "-sha256", "-sign", "private.pem"], input=text.encode(), capture_output=True, check=True).stdout',
      '    return base64.b64encode(der).decode()',
      'def headers_of(signature):',
      '    return {"Authorization": "Bearer " + os.environ["TOKEN"], "X-API-Key": os.environ["API_KEY"], "X-API-Timestamp": ts, "X-API-Signature": signature}',
      '_post = requests.post',
      'def post(*args, **kwargs):  # what the reader sees of the answer',
      '    response = _post(*args, **kwargs)',
      '    print(json.dumps({"status": response.status_code, "contentType": response.headers["content-type"],',
      '                      "answer": response.json(), "sent": response.request.body.decode()}))',
      '    return response',
      'requests.post = post',
      ''
    ].join('\n')
    const after = '\nprint(json.dumps({"body": body}))\n'
    const { stdout } = await run((python as { path: string }).path, ['-c', prelude + filled + after], { cwd: dir, env, timeout: 20_000 })
    const [response, signed] = stdout.trim().split('\n').map((line) => JSON.parse(line) as unknown)
    const { sent, ...got } = response as Answer & { sent: string }
    const { body } = signed as { body: string }
    // the block's comments: the body it signs, the body requests sends
    const comments = [...block.matchAll(/'(\{.*?)\.\.\.\}'/g)].map((m) => m[1] as string)
    t.equal(comments.length, 2, 'the block says what it signs and what it sends')
    t.ok(body.startsWith(comments[0] ?? '\0'), `it signed ${body}, as its comment says`)
    t.ok(sent.startsWith(comments[1] ?? '\0'), `requests sent ${sent}, as its comment says`)
    t.not(sent, body, 'the bytes sent are not the bytes signed')
    const page = answersAsShown(t, MISTAKE.json, { ...got, connection: undefined })

    // Your side of the comparison, from the intro's shell lines: what the table says you signed.
    const mine = await readerSide(t, `${String(CLOCK)}POST/v1/clients/${body}`, body)
    t.equal(mine.bodyLength, page.table.get('bodyLength'), 'wc -c: the body length you signed, as the table shows')
    t.equal(mine.bodySha256, page.table.get('bodySha256'), 'the body\'s SHA-256, as the table shows')
    t.equal(mine.signingStringSha256, page.table.get('signingStringSha256'), 'the signing string\'s SHA-256, as the table shows')
    t.not(mine.signingStringSha256, got.answer.signingStringSha256, 'which differs from keygate\'s: the signing strings differ')
    t.equal(mine.apiKey, got.answer.apiKey, 'openssl pkey ... | openssl dgst -sha256: the apiKey keygate verified with')
  })

  t.test(MISTAKE.newline, async (t) => {
    const got = await curled(docSnippet(PAGE, MISTAKE.newline, 'sh'), 'GET', '/v1/clients/')
    t.match(got.sig, /^[A-Za-z0-9+/]{342}==$/, 'a signature in one line of base64')
    const page = answersAsShown(t, MISTAKE.newline, got)
    t.equal(Number(page.table.get('signingStringLength')), Number(got.answer.signingStringLength) + 1, 'one byte more signed than verified')
  })

  t.test(MISTAKE.seconds, async (t) => {
    const block = docSnippet(PAGE, MISTAKE.seconds, 'sh')
    // the reader signs what the block set $TS to
    const got = await curled(`${block}SIG=$(printf %s "\${TS}GET/v1/clients/" | openssl dgst -sha256 -sign private.pem | base64 -w0)\n`, 'GET', '/v1/clients/')
    t.match(got.ts, /^\d{10}$/, 'X-API-Timestamp sent in seconds: 10 digits')
    answersAsShown(t, MISTAKE.seconds, got)
  })

  let queryAnswer: Record<string, unknown> = {}
  t.test(MISTAKE.query, async (t) => {
    const block = docSnippet(PAGE, MISTAKE.query, 'js')
    const AsyncFunction = (async () => {}).constructor as new (...args: string[]) => (...values: unknown[]) => Promise<{ target: string; signature: string }>
    const sign64 = (text: string): string => sign('sha256', Buffer.from(text), registered).toString('base64')
    const { target, signature } = await new AsyncFunction('ts', 'base', 'sign', `${block}\nreturn { target, signature }`)(String(CLOCK), gw.url, sign64)
    const res = await send(gw.url, target, {
      headers: { authorization: `Bearer ${token}`, 'x-api-key': API_KEY, 'x-api-timestamp': String(CLOCK), 'x-api-signature': signature }
    })
    queryAnswer = res.json()
    answersAsShown(t, MISTAKE.query, { status: res.status, contentType: res.headers['content-type'] ?? '', connection: undefined, answer: queryAnswer })
  })

  t.test(`${TITLE}: @keygate/client's describeRequest and signatureMismatches, with the answer to mistake 4`, async (t) => {
    const block = introBlock('ts')
    // the bare expressions printed, as a REPL shows them
    const printed = block.split('\n').map((line) => /^(import|const) |^\s*$/.test(line)
      ? line
      : `console.log(JSON.stringify(${line.replace(/\s*\/\/.*$/, '')}))`).join('\n')
    t.equal(printed.split('console.log').length - 1, 2, 'two lines show a value')
    const prelude = [
      "import { readFileSync } from 'node:fs'",
      // what the reader signed in mistake 4 (the path without its query), and keygate's answer
      "const method = 'GET'",
      "const target = '/v1/clients/'",
      "const body = ''",
      'const timestamp = process.env.TS',
      'const problem = JSON.parse(process.env.PROBLEM)',
      "const privateKey = readFileSync('private.pem', 'utf8')",
      ''
    ].join('\n')
    writeFileSync(join(dir, 'compare.mts'), `${prelude}${printed}\nconsole.log(JSON.stringify(mine))\n`)
    symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'), 'dir')
    const { stdout } = await run(process.execPath, [...TYPESCRIPT_NODE_ARGS, 'compare.mts'], {
      cwd: dir, env: { ...env, PROBLEM: JSON.stringify(queryAnswer) }, timeout: 30_000
    })
    const [mismatches, apiKey, mine] = stdout.trim().split('\n').map((line) => JSON.parse(line) as unknown)
    const example = /signatureMismatches\(mine, problem\)\s*\/\/ e\.g\. (\[.*\])/.exec(block)?.[1] ?? ''
    t.same(mismatches, JSON.parse(example.replaceAll("'", '"')), `signatureMismatches: ${example}, the block's example (mistake 4)`)
    t.equal(apiKey, queryAnswer.apiKey, 'apiKeyOf(privateKey): the apiKey keygate verified with')
    const table = shown(MISTAKE.query).table
    t.same(Object.fromEntries(Object.entries(mine as Record<string, unknown>).map(([k, v]) => [k, String(v)])), Object.fromEntries(table),
      'describeRequest: what mistake 4\'s table says you signed')
  })

  t.test(MISTAKE.wrongKey, async (t) => {
    const block = docSnippet(PAGE, MISTAKE.wrongKey, 'sh')
    const got = await curled(block, 'GET', '/v1/clients/')
    answersAsShown(t, MISTAKE.wrongKey, got)
    // Your side: the signing string of the block, the one keygate verified
    const signed = await bash(`printf %s "${/printf %s "([^"]*)"/.exec(block)?.[1] ?? ''}"`)
    t.equal(signed, `${String(CLOCK)}GET/v1/clients/`, 'the block signs timestamp, method and target')
    const mine = await readerSide(t, signed, '')
    t.equal(mine.signingStringSha256, got.answer.signingStringSha256, 'the SHA-256s are equal: another private key signed')
    t.equal(mine.signingStringSha256, shown(MISTAKE.wrongKey).table.get('signingStringSha256'), 'as the table shows')
  })

  t.test(MISTAKE.lineBroken, async (t) => {
    const got = await curled(docSnippet(PAGE, MISTAKE.lineBroken, 'sh'), 'GET', '/v1/clients/')
    t.match(got.sig, /^([A-Za-z0-9+/]{76}\n){4}[A-Za-z0-9+/]{38}==$/, 'plain base64: the signature in lines of 76')
    answersAsShown(t, MISTAKE.lineBroken, got)
  })

  t.test(MISTAKE.formBody, async (t) => {
    const got = await curled(docSnippet(PAGE, MISTAKE.formBody, 'sh'), 'POST', '/v1/clients/', { type: 'application/x-www-form-urlencoded' })
    answersAsShown(t, MISTAKE.formBody, got)
  })
})
