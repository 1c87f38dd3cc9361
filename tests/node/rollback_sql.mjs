// Prints pg-boss's own rollback SQL (12.38.0's, from PGBOSS_NODE_DIR), for the rollback tests. One JSON object on stdout.
//
//   node rollback_sql.mjs <schema>
//       {"46": <SQL>, "45": <SQL>, ..., "26": <SQL>}: for each version, the script `pg-boss rollback`
//       runs on a schema at that version (cli.js: migrationStore.rollback(schema, version,
//       getAllForConfig(config), noAdvisoryLocks)), with pg-boss's default configuration
//       (partitioned tables, covering indexes, advisory locks).
//
// <schema> is spelled as a pg-boss user configures it (bare, or in double quotes). pg-boss is
// resolved from PGBOSS_NODE_DIR, where scripts/test.sh installs it; migrationStore is not among its
// package exports, so it is imported from the file beside the package's entry point.
import { createRequire } from 'node:module'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'

const require = createRequire(`${process.env.PGBOSS_NODE_DIR}/`)
const dist = dirname(require.resolve('pg-boss'))
const store = await import(pathToFileURL(join(dist, 'migrationStore.js')).href)

const [schema] = process.argv.slice(2)
const config = { schema }
const scripts = {}
for (let version = 46; version >= 26; version--) {
  scripts[version] = store.rollback(schema, version, store.getAllForConfig(config), false)
}
console.log(JSON.stringify(scripts))
