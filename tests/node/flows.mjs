// Drives pg-boss 12.35.0's flows, for the flow interoperability tests. Prints one JSON object.
//
//   node flows.mjs flow <connection string> <schema> <jobs JSON>
//       boss.flow(jobs) (pg-boss's FlowJob shape: ref, name, data, options, dependsOn); prints
//       the ids by ref.
//   node flows.mjs edges <connection string> <schema> <queue> <id>
//       prints boss.getDependencies() and boss.getDependents() of the job.
//   node flows.mjs work <connection string> <schema> <queues JSON> <seconds>
//       until every job of the queues is completed (or <seconds> pass): fetch each queue's ready
//       jobs, complete each with {"step": data.step, "by": "node", "parents": [...]}, the parents'
//       outputs' steps read back through getDependencies() and getJobById(), then
//       boss.resolveFlow(); prints the steps in the order they were completed.
//
// pg-boss is resolved from PGBOSS_NODE_DIR, where scripts/test.sh installs it.
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

const require = createRequire(`${process.env.PGBOSS_NODE_DIR}/`)
const { PgBoss } = await import(pathToFileURL(require.resolve('pg-boss')).href)

const [command, connectionString, schema, ...args] = process.argv.slice(2)
const boss = new PgBoss({ connectionString, schema, supervise: false, schedule: false, migrate: false })
boss.on('error', (err) => { console.error(err); process.exitCode = 1 })
await boss.start()
try {
  const result = {}
  if (command === 'flow') {
    result.ids = await boss.flow(JSON.parse(args[0]))
  } else if (command === 'edges') {
    result.dependencies = await boss.getDependencies(args[0], args[1])
    result.dependents = await boss.getDependents(args[0], args[1])
  } else if (command === 'work') {
    const queues = JSON.parse(args[0])
    const deadline = Date.now() + Number(args[1]) * 1000
    result.completed = []
    while (Date.now() < deadline) {
      let pending = 0
      for (const name of queues) {
        for (const job of await boss.fetch(name, { batchSize: 100 })) {
          const parents = []
          for (const dep of await boss.getDependencies(name, job.id)) {
            const parent = await boss.getJobById(dep.name, dep.id)
            parents.push(parent.output.step)
          }
          parents.sort()
          await boss.complete(name, job.id, { step: job.data.step, by: 'node', parents })
          result.completed.push(job.data.step)
        }
        pending += (await boss.findJobs(name)).filter((j) => j.state !== 'completed').length
      }
      if (pending === 0) break
      await boss.resolveFlow()
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  } else {
    throw new Error(`unknown command ${command}`)
  }
  console.log(JSON.stringify(result))
} finally {
  await boss.stop({ graceful: false, wait: true })
}
