// Drives an older pg-boss release, for the upgrade tests. Prints one JSON object on stdout.
//
//   node legacy.mjs <pg-boss folder> <connection string> <schema> <queues JSON> <jobs JSON> [queue]
//       pg-boss installs its own schema (at the version of that release), creates each queue of
//       [{name, options}], sends each job of [{name, data, options}], and prints the version it
//       installed and the ids it sent. With a queue, it then fetches up to 20 of that queue's jobs
//       and completes each, and prints their ids as "completed".
//
// The release is resolved from the given folder (scripts/test.sh installs each under .venvs/).
// Releases before 12.x's named export default-export the class, hence both spellings.
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

const [folder, connectionString, schema, queues, jobs, work] = process.argv.slice(2)
const require = createRequire(`${folder}/`)
const module = await import(pathToFileURL(require.resolve('pg-boss')).href)
const PgBoss = module.PgBoss ?? module.default
const version = require('pg-boss/package.json').version

const boss = new PgBoss({ connectionString, schema, supervise: false, schedule: false })
boss.on('error', (err) => { console.error(err); process.exitCode = 1 })
await boss.start()
try {
  for (const { name, options } of JSON.parse(queues)) {
    await boss.createQueue(name, options ?? {})
  }
  const ids = []
  for (const { name, data, options } of JSON.parse(jobs)) {
    ids.push(await boss.send(name, data, options ?? {}))
  }
  const completed = []
  if (work) {
    for (const job of await boss.fetch(work, { batchSize: 20 })) {
      await boss.complete(work, job.id)
      completed.push(job.id)
    }
  }
  console.log(JSON.stringify({ release: version, ids, completed }))
} finally {
  await boss.stop({ graceful: false, wait: true })
}
