// The request-target rules of the protocol core (requestTargetProblem), which the gateway enforces
// before any other check and the client before signing: the canonical-path rules case by case,
// every encoded unreserved character in either hex case, and the query left as it is.
import t from 'tap'
import { requestTargetProblem } from '@keygate/client/protocol'

const hex = (code: number): string => code.toString(16).padStart(2, '0')

t.test('canonical paths: each alias form is refused, saying which rule', async (t) => {
  const cases: Array<[string, RegExp]> = [
    ['/v1/%63lients/42', /^The request path has an encoded unreserved character %63 \('c'\): send it unencoded$/],
    ['/v1/%43lients/42', /encoded unreserved character %43 \('C'\)/],
    ['/v1/clients/%34%32', /encoded unreserved character %34 \('4'\)/],
    ['/v1/clients/%7E', /encoded unreserved character %7E \('~'\)/],
    ['/v1/clients/%7e', /encoded unreserved character %7e \('~'\)/],
    ['/v1/clients/a%2Db', /encoded unreserved character %2D \('-'\)/],
    ['/v1/clients/a%5fb', /encoded unreserved character %5f \('_'\)/],
    ['/v1/clients/a%2eb', /encoded unreserved character %2e \('\.'\)/],
    ['/v1%2Fclients/42', /encoded "\/" \(%2F\)/],
    ['/v1%2fclients/42', /encoded "\/" \(%2f\)/],
    ['/v1%5Cclients/42', /encoded "\\" \(%5C\)/],
    ['/v1%5cclients/42', /encoded "\\" \(%5c\)/],
    ['//v1/clients/42', /empty segment \("\/\/"\)/],
    ['/v1//clients/42', /empty segment/],
    ['/v1/clients//', /empty segment/],
    ['/v1/;x/clients/', /a segment of matrix parameters only/],
    ['/;jsessionid=1', /a segment of matrix parameters only/],
    ['/v1/.;x/clients/', /a "\." segment before matrix parameters \("\.;x"\)/],
    ['/v1/..;/admin', /"\." or "\.\." segment/],
    ['/v1/./clients/', /"\." or "\.\." segment/],
    ['/v1/%2e%2e/admin', /"\." or "\.\." segment/],
    ['/v1/clients/%2e', /"\." or "\.\." segment/]
  ]
  for (const [target, detail] of cases) t.match(requestTargetProblem(target), detail, target)
})

t.test('every encoded unreserved character, upper- and lower-case hex, is refused; other encodings pass', async (t) => {
  let refused = 0
  let passed = 0
  for (let code = 0x20; code < 0x7f; code++) {
    const char = String.fromCharCode(code)
    const unreserved = /[A-Za-z0-9\-._~]/.test(char)
    for (const escape of [`%${hex(code).toUpperCase()}`, `%${hex(code).toLowerCase()}`]) {
      const problem = requestTargetProblem(`/v1/clients/x${escape}y`)
      if (unreserved) {
        t.match(problem, `encoded unreserved character ${escape} ('${char}')`, escape)
        refused++
      } else if (char === '/' || char === '\\') {
        t.match(problem, `(${escape})`, escape)
      } else {
        t.equal(problem, undefined, `${escape} (${JSON.stringify(char)}) is not unreserved: allowed`)
        passed++
      }
    }
  }
  t.equal(refused, 66 * 2, '66 unreserved characters, each in two hex cases')
  t.ok(passed > 0)
})

t.test('the rules stop at "?": the query is left as it is', async (t) => {
  for (const query of ['%63=1', 'a=%2F&b=%5C', 'next=//x', 'p=;x', 'x=%7e', 'path=/a//b/;c']) {
    t.equal(requestTargetProblem(`/v1/clients/?${query}`), undefined, query)
  }
})

t.test('canonical paths pass: ";" with a named segment is the route\'s call, not the protocol\'s', async (t) => {
  const targets = ['/', '/v1/clients/', '/v1/clients/42', '/v1/clients/a;v=1', '/v1/clients;v=1/42', '/files/a%20b', '/x/%C3%A9', '/x/%3B', '/a.b/c_d~e-f']
  for (const target of targets) {
    t.equal(requestTargetProblem(target), undefined, target)
  }
})

t.test('every encoded control character in a path, %00-%1F and %7F in either hex case, is refused; in the query it passes', async (t) => {
  const controls = [...Array.from({ length: 0x20 }, (_, code) => code), 0x7f]
  let refused = 0
  for (const code of controls) {
    for (const escape of [`%${hex(code).toUpperCase()}`, `%${hex(code).toLowerCase()}`]) {
      for (const target of [`/v1/clients${escape}/42`, `/v1/clients/42${escape}`, `/${escape}`]) {
        t.match(requestTargetProblem(target), `an encoded control character ${escape}`, target)
        refused++
      }
      t.equal(requestTargetProblem(`/v1/clients/?q=${escape}`), undefined, `?q=${escape}: the query is left as it is`)
    }
  }
  t.equal(refused, 33 * 2 * 3, '33 control codes, each in two hex cases, three places in the path')
})
