// axe-core in a page the browser tests drive (test/helpers/chromium.ts): its violations, shared by
// the portal's tests so each view is judged by one rule.
import axe from 'axe-core'
import type { Page } from 'puppeteer-core'

/** axe-core's violations on the page as it is, as "impact rule: targets" lines */
export async function axeViolations (page: Page): Promise<Array<{ impact: string; line: string }>> {
  // axe's source is evaluated by the DevTools protocol, which the page's CSP does not govern
  if (await page.evaluate('typeof window.axe') === 'undefined') await page.evaluate(axe.source)
  const violations = await page.evaluate(`axe.run(document, { resultTypes: ['violations'] }).then(({ violations }) =>
    violations.map(({ id, impact, nodes }) => ({ id, impact, targets: nodes.map((node) => node.target.join(' ')) })))`) as
    Array<{ id: string; impact: string; targets: string[] }>
  return violations.map(({ id, impact, targets }) => ({ impact, line: `${impact} ${id}: ${targets.join(', ')}` }))
}

/** the serious and critical ones, which a view must not have */
export const seriousOnes = (violations: Array<{ impact: string; line: string }>): string[] =>
  violations.filter(({ impact }) => impact === 'serious' || impact === 'critical').map(({ line }) => line)
