// Node 20 is end of life; keygate runs on 22 or later (24 LTS by choice). A machine whose own node
// is older still runs `npm test` and `npm start` on 24: the `node` devDependency puts that binary in
// node_modules/.bin, first on every npm script's PATH. Were it missing (its preinstall skipped or
// failed), scripts would quietly run on the machine's node instead; this is where that shows.
import { spawnSync } from 'node:child_process'
import t from 'tap'

const MIN_MAJOR = 22

const major = (version: string): number => Number(version.replace(/^v/, '').split('.')[0])

t.test('the tests run on Node 22 or later', async (t) => {
  t.ok(major(process.version) >= MIN_MAJOR, `this test process runs Node ${process.version} (${process.execPath})`)
})

t.test('the node that npm scripts find on the PATH is 22 or later', async (t) => {
  // What `npm start` and the other scripts run: `node` by name, looked up on the PATH.
  const found = spawnSync('node', ['-p', 'process.version + " " + process.execPath'], { encoding: 'utf8' })
  t.equal(found.status, 0, `node on the PATH answers${found.error === undefined ? '' : `: ${found.error.message}`}`)
  const [version = '', execPath = ''] = found.stdout.trim().split(' ')
  t.ok(major(version) >= MIN_MAJOR, `node on the PATH is ${version} (${execPath})`)
})
