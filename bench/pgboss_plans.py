"""pg-boss 12.35.0's own SQL text, read from its published plans module (Node), for the benches that
time pg-boss's statements beside ours on the same schema."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bench.peers import node_binary


def insert_jobs_sql(schema: str, queue: str, *, return_id: bool) -> str:
    """pg-boss's plans.insertJobs() for ``queue`` in job_common, with its one parameter renamed
    ``%(jobs)s``: what its insert() runs (``return_id`` False) and its send() (True)."""
    node_dir = os.environ.get(
        "PGBOSS_NODE_DIR", str(Path(__file__).resolve().parent.parent / ".venvs" / "node")
    )
    options = f"{{table: 'job_common', name: {json.dumps(queue)}, returnId: {json.dumps(return_id)}}}"
    script = (
        "const {createRequire} = require('node:module'); const {pathToFileURL} = require('node:url');"
        "const r = createRequire(process.env.PGBOSS_NODE_DIR + '/');"
        "import(pathToFileURL(r.resolve('pg-boss/dist/plans.js')).href).then(p => process.stdout.write("
        f"p.insertJobs({json.dumps(schema)}, {options})))"
    )
    done = subprocess.run(
        [node_binary(), "-e", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PGBOSS_NODE_DIR": node_dir},
    )
    return done.stdout.replace("$1", "%(jobs)s")
