// Drives pg-boss itself (12.38.0 unless PGBOSS_NODE_DIR names another release), for the interoperability tests. Prints one JSON object on stdout.
//
//   node pgboss.mjs install <connection string> <schema>
//       pg-boss installs its own schema (the reference the tests compare ours with).
//   node pgboss.mjs drift <connection string> <schema> [queues JSON]
//       pg-boss starts on an existing schema without migrating, creates the queues given as
//       [{name, options}], and reports its schema drift check (detectSchemaDrift()).
//   node pgboss.mjs send <connection string> <schema> <queue> <jobs JSON>
//       sends each {data, options} of the list with boss.send(); prints the ids.
//   node pgboss.mjs recreate <connection string> <schema> <queue> <options JSON> <jobs JSON>
//       deletes the queue and creates it again with the options (boss.deleteQueue(),
//       boss.createQueue()), then sends each {data, options} of the list; prints the ids.
//   node pgboss.mjs update <connection string> <schema> <queue> <requests JSON>
//   node pgboss.mjs upsert <connection string> <schema> <queue> <requests JSON>
//       runs boss.update() / boss.upsert() for each {data, options} of the list (a request without
//       a "data" key leaves the data out); prints the results.
//   node pgboss.mjs work <connection string> <schema> <queue> <output JSON>
//       fetches up to 100 jobs (with metadata) and completes each with the output; prints them.
//   node pgboss.mjs get <connection string> <schema> <queue> <id>
//       prints the job as pg-boss reads it (findJobs by id).
//   node pgboss.mjs redrive <connection string> <schema> <queue> [options JSON]
//       redrives the dead-letter queue with boss.redrive(); prints the number moved.
//   node pgboss.mjs preview <connection string> <schema> <queue> [options JSON]
//       prints boss.previewRedrive() of the dead-letter queue.
//   node pgboss.mjs schedule <connection string> <schema> <queue> <expression> <data JSON> <options JSON>
//       boss.schedule(); prints the row as boss.getSchedule() reads it back.
//   node pgboss.mjs preview-schedules <connection string> <schema> <requests JSON>
//       boss.previewSchedule() of each {expression, tz, from, count}; prints the ISO instants.
//   node pgboss.mjs timekeep <connection string> <schema> <queue> <seconds>
//       starts pg-boss's own timekeeper (schedule: true) and waits up to <seconds> for a job in
//       <queue>; prints the queue's jobs.
//   node pgboss.mjs migrate <connection string> <schema>
//       pg-boss migrates an older schema of its own to its version (boss.start() with migrate). Its bam runner
//       builds nothing: it polls at once, but every 24 hours at most, and the test stamps
//       version.bam_on first, so the index builds the migration queued are left pending.
//   node pgboss.mjs bam <connection string> <schema>
//       prints boss.getBamStatus() and boss.getBamEntries().
//   node pgboss.mjs build <connection string> <schema> [seconds]
//       starts with migrate (on a schema at 46 there is nothing to migrate), so pg-boss's own bam
//       runner builds what bam holds (the test clears version.bam_on first); waits up to <seconds>
//       (60) until no command is pending or in progress, then prints as bam does.
//   node pgboss.mjs register <connection string> <schema> <instance name> <heartbeat seconds>
//       starts with the instance registry under that name, prints {"registered": true} (one line)
//       and stays registered until its stdin closes, then stops gracefully.
//   node pgboss.mjs instances <connection string> <schema> [options JSON]
//       prints boss.getInstances(options), from an instance that does not register itself.
//   node pgboss.mjs supervise <connection string> <schema> <queue> [percentiles JSON]
//       runs one pass of pg-boss's own monitor and maintenance over <queue> (boss.supervise(), with
//       persistQueueStats), then prints the queue as boss.getQueue() reads it and its stats as
//       boss.getQueueStats() reads them (with the percentiles, when given).
//   node pgboss.mjs resolve <connection string> <schema>
//       runs one pass of pg-boss's own flow resolver now (boss.resolveFlow()); prints {}.
//   node pgboss.mjs send-traced <connection string> <schema> <queue> <jobs JSON> <traceparent>
//       send's boss.send() with openTelemetry.propagateContext and a propagator that injects
//       {"traceparent": <traceparent>}: pg-boss's own send stores that carrier on each job (no
//       OpenTelemetry SDK is installed beside pg-boss, so its send span has no ids of its own).
//   node pgboss.mjs fetch-traced <connection string> <schema> <queue>
//       boss.fetch() of up to 100 jobs with a propagator that records the carrier pg-boss reads
//       back for each job it fetched; prints the jobs' ids and those carriers, then completes them.
//
// PGBOSS_NODE_BACKEND, when set, is pg-boss's `backend` option (tests/conftest.py sets it to
// citus when the suite runs on the Citus cluster in the "citus" mode).
//
// <schema> is spelled as a pg-boss user configures it: bare, or in double quotes when the name
// needs them. pg-boss is resolved from PGBOSS_NODE_DIR, where scripts/test.sh installs it.
import { createRequire } from 'node:module'
import { pathToFileURL } from 'node:url'

const require = createRequire(`${process.env.PGBOSS_NODE_DIR}/`)
const { PgBoss } = await import(pathToFileURL(require.resolve('pg-boss')).href)

const [command, connectionString, schema, ...args] = process.argv.slice(2)
// The trace-context commands' propagator (pg-boss's openTelemetry.propagator option): it writes
// the traceparent given to send-traced, and records what fetch-traced hands it to read.
const extracted = []
const propagator = {
  inject (context, carrier, setter) { setter.set(carrier, 'traceparent', args[2]) },
  extract (context, carrier) { extracted.push(carrier); return context },
  fields () { return ['traceparent'] }
}
const boss = new PgBoss({
  ...(command === 'send-traced' || command === 'fetch-traced'
    ? { openTelemetry: { propagateContext: command === 'send-traced', propagator } }
    : {}),
  connectionString,
  schema,
  ...(process.env.PGBOSS_NODE_BACKEND ? { backend: process.env.PGBOSS_NODE_BACKEND } : {}),
  supervise: false,
  schedule: command === 'timekeep',
  cronWorkerIntervalSeconds: 1,
  migrate: command === 'install' || command === 'migrate' || command === 'build',
  ...(command === 'supervise' ? { persistQueueStats: true } : {}),
  ...(command === 'migrate' ? { bamIntervalSeconds: 86400 } : {}),
  createSchema: command === 'install',
  ...(command === 'register' ? { instanceName: args[0], instanceHeartbeatSeconds: Number(args[1]) } : {}),
  ...(command === 'instances' ? { registerInstance: false } : {})
})
boss.on('error', (err) => { console.error(err); process.exitCode = 1 })
await boss.start()
try {
  const result = {}
  if (command === 'drift') {
    for (const { name, options } of JSON.parse(args[0] || '[]')) {
      await boss.createQueue(name, options)
    }
    result.drift = await boss.detectSchemaDrift()
  } else if (command === 'recreate') {
    await boss.deleteQueue(args[0])
    await boss.createQueue(args[0], JSON.parse(args[1]))
    result.ids = []
    for (const { data, options } of JSON.parse(args[2])) {
      result.ids.push(await boss.send(args[0], data, options ?? {}))
    }
  } else if (command === 'send') {
    result.ids = []
    for (const { data, options } of JSON.parse(args[1])) {
      result.ids.push(await boss.send(args[0], data, options ?? {}))
    }
  } else if (command === 'send-traced') {
    result.ids = []
    for (const { data, options } of JSON.parse(args[1])) {
      result.ids.push(await boss.send(args[0], data, options ?? {}))
    }
  } else if (command === 'fetch-traced') {
    const jobs = await boss.fetch(args[0], { batchSize: 100 })
    result.ids = jobs.map((job) => job.id)
    result.carriers = extracted
    if (jobs.length) await boss.complete(args[0], jobs)
  } else if (command === 'update' || command === 'upsert') {
    result.results = []
    for (const request of JSON.parse(args[1])) {
      const data = 'data' in request ? request.data : undefined
      result.results.push(await boss[command](args[0], data, request.options ?? {}))
    }
  } else if (command === 'work') {
    const jobs = await boss.fetch(args[0], { batchSize: 100, includeMetadata: true })
    if (jobs.length) await boss.complete(args[0], jobs, JSON.parse(args[1]))
    result.jobs = jobs
  } else if (command === 'get') {
    result.jobs = await boss.findJobs(args[0], { id: args[1] })
  } else if (command === 'redrive') {
    result.moved = await boss.redrive(args[0], JSON.parse(args[1] || '{}'))
  } else if (command === 'preview') {
    result.preview = await boss.previewRedrive(args[0], JSON.parse(args[1] || '{}'))
  } else if (command === 'schedule') {
    await boss.schedule(args[0], args[1], JSON.parse(args[2]), JSON.parse(args[3]))
    result.schedule = await boss.getSchedule(args[0], JSON.parse(args[3]).key ?? '')
  } else if (command === 'preview-schedules') {
    result.previews = JSON.parse(args[0]).map(({ expression, tz, from, count }) =>
      boss.previewSchedule(expression, { tz, from: new Date(from), count }).map((d) => d.toISOString()))
  } else if (command === 'timekeep') {
    const deadline = Date.now() + Number(args[1]) * 1000
    let jobs = []
    while (jobs.length === 0 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 250))
      jobs = await boss.findJobs(args[0])
    }
    result.jobs = jobs
  } else if (command === 'bam') {
    result.status = await boss.getBamStatus()
    result.entries = await boss.getBamEntries()
  } else if (command === 'build') {
    const deadline = Date.now() + Number(args[0] || 60) * 1000
    const unfinished = async () => (await boss.getBamStatus())
      .some(({ status }) => status === 'pending' || status === 'in_progress')
    while (await unfinished() && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
    result.status = await boss.getBamStatus()
    result.entries = await boss.getBamEntries()
  } else if (command === 'register') {
    console.log(JSON.stringify({ registered: true }))
    process.stdin.resume()
    await new Promise((resolve) => process.stdin.on('end', resolve))
  } else if (command === 'instances') {
    result.instances = await boss.getInstances(JSON.parse(args[0] || '{}'))
  } else if (command === 'resolve') {
    await boss.resolveFlow()
  } else if (command === 'supervise') {
    await boss.supervise(args[0])
    result.queue = await boss.getQueue(args[0])
    const percentiles = args[1] ? JSON.parse(args[1]) : undefined
    result.stats = await boss.getQueueStats(args[0], percentiles ? { percentiles } : {})
  } else if (command !== 'install' && command !== 'migrate') {
    throw new Error(`unknown command ${command}`)
  }
  console.log(JSON.stringify(result))
} finally {
  await boss.stop({ graceful: false, wait: true })
}
