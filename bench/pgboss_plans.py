"""pg-boss 12.35.0's own SQL text, read from its published plans module (Node), for the benches that
time pg-boss's statements beside ours on the same schema."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from bench.peers import node_binary


def _plans_call(expression: str) -> str:
    """What ``expression`` (JavaScript, over pg-boss's plans module ``p``) returns, as text."""
    node_dir = os.environ.get(
        "PGBOSS_NODE_DIR", str(Path(__file__).resolve().parent.parent / ".venvs" / "node")
    )
    script = (
        "const {createRequire} = require('node:module'); const {pathToFileURL} = require('node:url');"
        "const r = createRequire(process.env.PGBOSS_NODE_DIR + '/');"
        "import(pathToFileURL(r.resolve('pg-boss/dist/plans.js')).href).then(p => process.stdout.write("
        f"{expression}))"
    )
    done = subprocess.run(
        [node_binary(), "-e", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PGBOSS_NODE_DIR": node_dir},
    )
    return done.stdout


def insert_jobs_sql(schema: str, queue: str, *, return_id: bool) -> str:
    """pg-boss's plans.insertJobs() for ``queue`` in job_common, with its one parameter renamed
    ``%(jobs)s``: what its insert() runs (``return_id`` False) and its send() (True)."""
    options = f"{{table: 'job_common', name: {json.dumps(queue)}, returnId: {json.dumps(return_id)}}}"
    return _plans_call(f"p.insertJobs({json.dumps(schema)}, {options})").replace("$1", "%(jobs)s")


def fetch_next_job_sql(schema: str, queue: str, *, limit: int) -> str:
    """pg-boss's plans.fetchNextJob() text for a standard queue in job_common, without metadata:
    what its fetch() and work() run to claim ``limit`` jobs (the name and limit are inlined)."""
    options = (
        f"{{schema: {json.dumps(schema)}, table: 'job_common', name: {json.dumps(queue)}, "
        f"policy: 'standard', limit: {int(limit)}, includeMetadata: false}}"
    )
    return _plans_call(f"p.fetchNextJob({options}).text")


def complete_jobs_sql(schema: str) -> str:
    """pg-boss's plans.completeJobs() for job_common, unfenced, with its parameters renamed
    ``%(name)s``, ``%(ids)s`` and ``%(output)s``: what its complete() runs."""
    text = _plans_call(f"p.completeJobs({json.dumps(schema)}, 'job_common', false, false)")
    return text.replace("$1", "%(name)s").replace("$2", "%(ids)s").replace("$3", "%(output)s")
