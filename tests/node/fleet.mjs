// pg-boss's side of the mixed fleet (tests/fleet.py): its workers, its supervisor and its sender, each a
// process the harness starts and kills. pg-boss 12.38.0 unless PGBOSS_NODE_DIR names another release.
//
//   node fleet.mjs work <connection string> <schema> <ledger file> <effect table> <queues JSON> <concurrency>
//       works each queue with pg-boss's transactional worker (batchSize 1, localConcurrency
//       <concurrency>), as tests/fleetapp/jobs.py does on the Python side: a "run" line appended to
//       the ledger, a sleep of the job's data.ms, the effect row inserted on the handler's
//       transaction (committed with the completion, or not at all), an "end" line. Prints
//       {"ready": true} once every queue is worked, and runs until killed (SIGTERM stops it).
//   node fleet.mjs supervise <connection string> <schema> <queue>
//       pg-boss's own supervisor pass over <queue> every second (boss.supervise(): expiry and
//       heartbeat failures, counts), no workers. Prints {"ready": true} and runs until killed.
//   node fleet.mjs send <connection string> <schema> <plan file> <seconds> <ids file>
//       sends the plan's jobs ([[queue, data], ...]) with boss.send(), one at a time, spread evenly
//       over <seconds>; writes their ids (a JSON list, the plan's order) to <ids file> when done
//       (a file: a pipe would fill up at a few thousand ids and stall the sender).
//
// <schema> is spelled as a pg-boss user configures it: bare, or in double quotes when the name
// needs them.
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

const require = createRequire(`${process.env.PGBOSS_NODE_DIR}/`)
const { PgBoss } = await import(pathToFileURL(require.resolve('pg-boss')).href)

const [role, connectionString, schema, ...args] = process.argv.slice(2)
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

const boss = new PgBoss({
  connectionString,
  schema,
  migrate: false,
  schedule: false,
  supervise: false,
  // A queue's pass may run again a second after the last one (the default waits a minute).
  monitorIntervalSeconds: 1,
  // Each transactional handler holds a connection for its run, beside the fetches and heartbeats.
  max: 12
})
// A killed neighbour's connection errors are expected in a storm; they are logged, never fatal.
boss.on('error', (err) => console.error(`pg-boss error: ${err?.message ?? err}`))
await boss.start()

const stop = async () => {
  await boss.stop({ graceful: true, wait: true, timeout: 5000 })
  process.exit(0)
}
process.on('SIGTERM', stop)
process.on('SIGINT', stop)

if (role === 'work') {
  const [ledger, effectTable, queues, concurrency] = args
  const line = (event, queue, job) =>
    appendFileSync(ledger, `${event} ${queue} ${job.id} ${job.retryCount} node ${process.pid} ${(Date.now() / 1000).toFixed(6)}\n`)
  for (const queue of JSON.parse(queues)) {
    await boss.work(queue, {
      batchSize: 1,
      localConcurrency: Number(concurrency),
      pollingIntervalSeconds: 0.5,
      transactional: true
    }, async ([job], db) => {
      line('run', queue, job)
      await sleep(job.data.ms)
      await db.executeSql(
        `INSERT INTO ${effectTable} (job_id, queue, attempt, side, pid) VALUES ($1, $2, $3, $4, $5)`,
        [job.id, queue, job.retryCount, 'node', process.pid]
      )
      line('end', queue, job)
      return { side: 'node', pid: process.pid }
    })
  }
  console.log(JSON.stringify({ ready: true }))
} else if (role === 'supervise') {
  console.log(JSON.stringify({ ready: true }))
  for (;;) {
    await boss.supervise(args[0])
    await sleep(1000)
  }
} else if (role === 'send') {
  const [planFile, seconds, idsFile] = args
  const plan = JSON.parse(readFileSync(planFile, 'utf8'))
  const start = Date.now()
  const ids = []
  for (const [i, [queue, data]] of plan.entries()) {
    const due = start + (i * Number(seconds) * 1000) / plan.length
    if (Date.now() < due) await sleep(due - Date.now())
    ids.push(await boss.send(queue, data))
  }
  writeFileSync(idsFile, JSON.stringify(ids))
  await boss.stop({ graceful: false, wait: true })
} else {
  throw new Error(`unknown role ${role}`)
}
