// pg-boss itself (the release PGBOSS_NODE_DIR holds: 12.38.0, or 12.35.0), for bench/peers.py: the same workloads on the same cluster and schema.
// Prints one JSON object on stdout.
//
//   node peers.mjs insert <connection string> <schema> <queue> <jobs> <per call>
//       boss.insert(queue, [...]) with <per call> jobs a call, awaited in turn; {seconds}
//   node peers.mjs send <connection string> <schema> <queue> <jobs>
//       one boss.send(queue, data) per job, awaited in turn; {seconds}
//   node peers.mjs work <connection string> <schema> <queue> <jobs> <batch size> <concurrency>
//       boss.work(queue, options, no-op) until <jobs> jobs of the queue are completed; the parent
//       reads the drain's time from the rows (first started_on to last completed_on); {seconds}
//       is the wall time from work() to the last completion seen, for reference only.
//   node peers.mjs supervise <connection string> <schema> -
//       one boss.supervise() pass over every queue (persistQueueStats on, as django_pgboss's
//       default PERSIST_QUEUE_STATS); {seconds} around the call, and the process's peak RSS.
//
// The clock starts after boss.start() (its pool connected, the schema checked), as the Python
// side's starts after Django is set up: neither process's start-up is the workload.
// pg-boss is resolved from PGBOSS_NODE_DIR, where scripts/test.sh installs it.
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

const require = createRequire(`${process.env.PGBOSS_NODE_DIR}/`)
const { PgBoss } = await import(pathToFileURL(require.resolve('pg-boss')).href)

const [command, connectionString, schema, queue, ...args] = process.argv.slice(2)
const jobs = Number(args[0])
const boss = new PgBoss({
  connectionString,
  schema,
  supervise: false,
  schedule: false,
  // migrate: true, because pg-boss 12.35 with migrate: false refuses a schema of any other version,
  // a newer one included; with it, 12.35 runs on schema 46 as it is (it only ever migrates up), and
  // 12.38 finds its own version and does nothing.
  migrate: true,
  createSchema: false,
  // The queue cache carries the ready count that burstWhenReadyExceeds reads; refreshed every
  // second (its minimum) so a worker sees the backlog the monitor counted before the drain.
  queueCacheIntervalSeconds: 1,
  // One connection per concurrent worker plus one for the completions and the cache refresh.
  max: 10,
  persistQueueStats: true
})
boss.on('error', (err) => { console.error(err); process.exitCode = 1 })
await boss.start()
const now = () => Number(process.hrtime.bigint()) / 1e9
const result = {}
try {
  if (command === 'insert') {
    const perCall = Number(args[1])
    const started = now()
    for (let start = 0; start < jobs; start += perCall) {
      const batch = []
      for (let i = start; i < Math.min(start + perCall, jobs); i++) batch.push({ data: { i } })
      await boss.insert(queue, batch)
    }
    result.seconds = now() - started
  } else if (command === 'send') {
    const started = now()
    for (let i = 0; i < jobs; i++) await boss.send(queue, { i })
    result.seconds = now() - started
  } else if (command === 'work') {
    const batchSize = Number(args[1])
    const localConcurrency = Number(args[2])
    const db = boss.getDb()
    const table = JSON.parse(args[3])
    const started = now()
    let done = 0
    // pg-boss's fastest documented options: localConcurrency fetch loops, each re-fetching at once
    // while its fetches come back full (burstWhenBatchFull, batch sizes above 1) or while the
    // cached ready count is above zero (burstWhenReadyExceeds: 1 (its least), the only burst at batch size 1),
    // instead of sleeping pollingIntervalSeconds between fetches.
    await boss.work(queue, {
      batchSize,
      localConcurrency,
      pollingIntervalSeconds: 0.5,
      burstWhenBatchFull: batchSize > 1,
      burstWhenReadyExceeds: 1
    }, async (batch) => { done += batch.length })
    // The handler counts what it was given (cheap to watch); only then is the database asked,
    // since the completions are written after the handler returns.
    while (done < jobs) await new Promise((resolve) => setTimeout(resolve, 5))
    while (true) {
      const { rows } = await db.executeSql(
        `SELECT count(*)::int AS n FROM ${table} WHERE name = $1 AND state = 'completed'`, [queue])
      if (rows[0].n >= jobs) break
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
    result.seconds = now() - started
    result.handled = done
  } else if (command === 'supervise') {
    const started = now()
    await boss.supervise()
    result.seconds = now() - started
    result.maxRssBytes = process.resourceUsage().maxRSS * 1024
  } else {
    throw new Error(`unknown command ${command}`)
  }
} finally {
  await boss.stop({ graceful: true, wait: true, timeout: 5000 })
}
console.log(JSON.stringify(result))
