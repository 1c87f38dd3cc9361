// A pg-boss release sending and working one queue for as long as it is let, for the upgrade tests.
//
//   node writer.mjs <pg-boss folder> <connection string> <schema> <queue>
//       starts that release (migrate: false, no supervisor or timekeeper), prints {"ready": true}
//       on one line, then loops: send() one job, fetch() up to five and complete() them, each call
//       timed, until its stdin closes; then prints one JSON object: the ids it sent, how many it
//       completed, each loop's [start, end] in milliseconds since the epoch, and every error a call
//       raised (the loop goes on after one, as a service would).
//
// The release is resolved from the given folder (scripts/test.sh installs each under .venvs/).
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

const [folder, connectionString, schema, queue] = process.argv.slice(2)
const require = createRequire(`${folder}/`)
const module = await import(pathToFileURL(require.resolve('pg-boss')).href)
const PgBoss = module.PgBoss ?? module.default

const boss = new PgBoss({ connectionString, schema, supervise: false, schedule: false, migrate: false })
const errors = []
boss.on('error', (err) => errors.push(String(err?.message ?? err)))
await boss.start()
let open = true
process.stdin.on('end', () => { open = false })
process.stdin.resume()
console.log(JSON.stringify({ ready: true }))
const sent = []
const loops = []
let completed = 0
while (open) {
  const start = Date.now()
  try {
    sent.push(await boss.send(queue, { by: 'node' }))
    const jobs = await boss.fetch(queue, { batchSize: 5 })
    if (jobs.length) {
      await boss.complete(queue, jobs.map((job) => job.id))
      completed += jobs.length
    }
  } catch (err) {
    errors.push(String(err?.message ?? err))
  }
  loops.push([start, Date.now()])
}
await boss.stop({ graceful: false, wait: true })
console.log(JSON.stringify({ sent, completed, loops, errors }))
