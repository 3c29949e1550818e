// What the budget of failed signature checks (auth/signature-budget.ts) lets a flood of bad
// signatures from 100 addresses, all with one key, cost: the verifications it still gets per
// window, with the key's stage and without it (only each address's own budget), at the defaults
// and at KEYGATE_SIGNATURE_FAILURE_LIMIT=40 per 60 s. The real budget, driven with a simulated
// clock the way the signed pipeline drives it (the address's budget, then the key's, then a
// verification that fails); the flood sends 10,000 requests a second for 5 windows, its addresses
// one after another (1,000 requests each in turn) or taking turns (one request each). The hold
// of the 429s is left out (delayMs 0): it slows clients that wait for answers, it does not change
// which requests are verified. Then the memory of the (key, address) counts when full. Run it with
//   node --expose-gc --conditions=keygate-source --import tsx bench/signature-budget-flood.ts
import { randomBytes } from 'node:crypto'
import { createSignatureBudget, SIGNATURE_BUDGET_KEY_ADDRESSES, type SignatureBudgetOptions } from '../gateway/src/auth/signature-budget.js'

const ADDRESSES = 100
const PER_SECOND = 10_000
const WINDOWS = 5
const KEY = 'a'.repeat(64)

interface Flood { verifications: number[]; total: number }

/** verifications per window (of the budget's own window) while `ADDRESSES` addresses flood KEY in blocks of `block` requests */
function flood (options: SignatureBudgetOptions, keyStage: boolean, block: number): Flood {
  const budget = createSignatureBudget({ ...options, delayMs: 0 })
  const windowMs = budget.limits.windowSeconds * 1000
  const requests = PER_SECOND * budget.limits.windowSeconds * WINDOWS
  const verifications = new Array<number>(WINDOWS).fill(0)
  for (let i = 0; i < requests; i++) {
    const nowMs = (i * 1000) / PER_SECOND
    const address = `10.0.${Math.floor(i / block) % ADDRESSES}.1`
    if (budget.refuse(address, nowMs) !== undefined) continue
    if (keyStage && budget.refuseForKey(address, KEY, nowMs) !== undefined) continue
    const window = Math.floor(nowMs / windowMs)
    verifications[window] = (verifications[window] ?? 0) + 1
    budget.recordFailure(address, nowMs, KEY)
  }
  return { verifications, total: verifications.reduce((a, b) => a + b, 0) }
}

const settings: Array<[string, SignatureBudgetOptions]> = [
  ['defaults (200 per 10 s; 2 failures, 3 addresses)', {}],
  ['KEYGATE_SIGNATURE_FAILURE_LIMIT=40, _WINDOW_SECONDS=60', { limit: 40, windowSeconds: 60 }]
]
console.log(`${ADDRESSES} addresses flooding one key with bad signatures, ${PER_SECOND} requests/s, ${WINDOWS} windows: verifications per window`)
for (const [label, options] of settings) {
  console.log(`\n${label}`)
  for (const [order, block] of [['one after another', 1000], ['taking turns', 1]] as const) {
    for (const keyStage of [true, false]) {
      const { verifications, total } = flood(options, keyStage, block)
      const stage = keyStage ? 'key stage   ' : 'no key stage'
      console.log(`  ${order.padEnd(18)} ${stage}  ${verifications.join(', ').padEnd(40)} (${(total / WINDOWS).toFixed(0)} a window on average)`)
    }
  }
}

// the (key, address) counts, full: the longest ids (a 64-character apiKey and an IPv6 /64)
const gc = (globalThis as { gc?: () => void }).gc
if (gc === undefined) {
  console.log('\n(memory: run with node --expose-gc)')
} else {
  const budget = createSignatureBudget({ delayMs: 0, maxAddresses: 1, maxKeys: 1 })
  const keys = Array.from({ length: 1000 }, () => randomBytes(32).toString('hex'))
  gc()
  const before = process.memoryUsage().heapUsed
  for (let i = 0; i < SIGNATURE_BUDGET_KEY_ADDRESSES; i++) {
    budget.recordFailure(`2001:db8:${(i >> 8).toString(16)}:${(i & 0xff).toString(16)}::1`, 0, keys[i % keys.length])
  }
  gc()
  const bytes = process.memoryUsage().heapUsed - before
  console.log(`\n(key, address) counts: ${budget.keyAddresses} held, ${(bytes / 1e6).toFixed(1)} MB (${(bytes / budget.keyAddresses).toFixed(0)} bytes each)`)
}
