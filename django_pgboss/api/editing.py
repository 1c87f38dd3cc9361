"""Changing jobs once sent: partial edits of waiting jobs (update, upsert), the bulk purges of a
queue's jobs, and the keys a failed job blocks on a key_strict_fifo queue.

:class:`JobEditor` holds the statements behind those Boss methods (Boss documents them). Every
argument is checked before any SQL runs.
"""

from __future__ import annotations

from typing import Any

from django_pgboss.api.queues import reduce_retained, require_dead_letter
from django_pgboss.api.sending import JobSender
from django_pgboss.arguments import edit_options, edit_target, integer, page_after, page_limit
from django_pgboss.arguments import queue_name as validate_queue_name
from django_pgboss.constants import UNSET, QueuePolicy
from django_pgboss.db.context import DatabaseContext
from django_pgboss.db.identifiers import schema_key
from django_pgboss.exceptions import InvalidOption, QueueNotFound, WrongPolicy
from django_pgboss.plans import editing as edit_plans
from django_pgboss.plans import queues as queue_plans
from django_pgboss.records import UpdateResult, UpsertResult
from django_pgboss.wire import to_json

#: The job tables, by (alias, schema, table), on which job_i13 was found valid. An index once valid
#: stays so (only a rollback below schema 45 drops it, and that drops upsert_by_key too), so each
#: process asks the catalog once per table, not once per upsert.
_UPSERT_INDEX_READY: set[tuple[str, str, str]] = set()
#: Rows each purge statement deletes. bench/purge.py on a million jobs: the longest row lock grows
#: with the batch (124 ms at 1,000, 418 ms at 5,000, 1.45 s at 20,000) while the purge's total
#: time stays the same (its cost is per row), so the smallest batch that costs nothing extra.
PURGE_BATCH_SIZE = 1000


class JobEditor:
    """Edit, upsert and purge jobs over one database context (see Boss for what each does);
    ``sender`` inserts the job an upsert finds missing."""

    def __init__(self, context: DatabaseContext, sender: JobSender) -> None:
        self.context = context
        self.sender = sender

    # -- partial edits -------------------------------------------------------------------------

    def update(
        self,
        name: str,
        data: Any = UNSET,
        *,
        id: Any = None,
        singleton_key: str | None = None,
        match: str = "newest",
        **options: Any,
    ) -> UpdateResult:
        """See Boss.update()."""
        validate_queue_name(name)
        by, target = edit_target("update()", id, singleton_key, match)
        values = edit_options("update()", options)
        data_json = to_json(data, "job data") if data is not UNSET else UNSET
        if values.get("dead_letter") is not None:
            require_dead_letter(self.context, values["dead_letter"])
        ids = self._edit(name, by, target, match, data_json, values)
        return UpdateResult(jobs=ids, updated=len(ids))

    def upsert(
        self,
        name: str,
        data: Any = UNSET,
        *,
        singleton_key: str,
        match: str = "newest",
        **options: Any,
    ) -> UpsertResult:
        """See Boss.upsert()."""
        validate_queue_name(name)
        if "id" in options:
            raise InvalidOption(
                "upsert() finds jobs by singleton_key; edit a job by its id with update(id=...)"
            )
        if singleton_key is None:
            raise InvalidOption("upsert() needs a singleton_key")
        by, key = edit_target("upsert()", None, singleton_key, match)
        values = edit_options("upsert()", options)
        data_json = to_json(data, "job data") if data is not UNSET else UNSET
        context = self.context
        route = context.route(name)
        with context.atomic():
            if values.get("dead_letter") is not None:
                require_dead_letter(context, values["dead_letter"])
            if not self._upsert_index_ready(route.table):
                # job_i13 is still being built on this table (bam, after an upgrade from schema
                # 44): pg-boss 12.38 upserts unguarded then, and so do Node's upserts here, but two
                # of ours racing for a key are kept apart as before schema 45, on a lock held until
                # the transaction ends (the next upsert of the key then sees this one's job).
                context.execute(
                    edit_plans.upsert_lock(), {"lock_key": context.lock_key(f"upsert:{name}:{key}")}
                )
            ids = self._edit(name, by, key, match, data_json, values)
            if ids:
                return UpsertResult(jobs=ids, updated=len(ids), inserted=0)
            send_options = {option: value for option, value in options.items() if value is not None}
            # Marked upsert_by_key, as pg-boss 12.38 inserts it: job_i13 allows one created job so
            # marked per key, whatever the policy. Two upserts that both found nothing to edit
            # both insert; the second waits on the first's index entry until it commits, then
            # conflicts (ON CONFLICT DO NOTHING writes nothing) and edits the first's job below,
            # which its new statement snapshot sees. Node's upserts take the same path, so no
            # lock is needed between the languages (or between ours).
            job_id = self.sender.send_upserted(
                name, None if data is UNSET else data, singleton_key=key, **send_options
            )
            if job_id is not None:
                return UpsertResult(jobs=[job_id], updated=0, inserted=1)
            # job_i13 or the policy index refused the insert: a concurrent send or upsert of the key
            # won, and its job is visible now (the insert waited for it to commit). Edit that one.
            ids = self._edit(name, by, key, match, data_json, values)
            return UpsertResult(jobs=ids, updated=len(ids), inserted=0)

    def _upsert_index_ready(self, table: str) -> bool:
        """Whether job_i13 is valid on ``table`` (quoted), read once per table and process."""
        context = self.context
        cache_key = (context.using, context.schema, table)
        if cache_key in _UPSERT_INDEX_READY:
            return True
        (found,) = context.one(edit_plans.upsert_index_ready(), {"table": f"{context.quoted_schema}.{table}"})
        ready = bool(found)
        if ready:
            _UPSERT_INDEX_READY.add(cache_key)
        return ready

    def _edit(
        self, name: str, by: str, target: Any, match: str, data_json: Any, values: dict[str, Any]
    ) -> list[str]:
        context = self.context
        route = context.route(name)
        params: dict[str, Any] = {"name": name, by: target}
        columns = []
        if data_json is not UNSET:
            columns.append("data")
            params["data"] = data_json
        for option, value in values.items():
            if option in edit_plans.EDITABLE_COLUMNS:
                columns.append(option)
                params[option] = value
        if "start_after" in values:
            params["start_after"] = values["start_after"]
        if "retention_seconds" in values:
            params["retention_seconds"] = values["retention_seconds"]
        if route.notify:
            params["schema_key"] = schema_key(context.schema)
        sql = edit_plans.update_jobs(
            context.quoted_schema,
            route.table,
            by=by,
            match=match,
            columns=tuple(columns),
            start_after=edit_plans.start_after_kind(values["start_after"]) if "start_after" in values else "",
            retention="retention_seconds" in values,
            notify=route.notify,
        )
        return [str(row[0]) for row in context.all(sql, params)]

    # -- purges --------------------------------------------------------------------------------

    def delete_queued_jobs(self, name: str, *, batch_size: int = PURGE_BATCH_SIZE) -> int:
        """See Boss.delete_queued_jobs()."""
        return self._purge(validate_queue_name(name), "queued", batch_size)

    def delete_stored_jobs(self, name: str, *, batch_size: int = PURGE_BATCH_SIZE) -> int:
        """See Boss.delete_stored_jobs()."""
        return self._purge(validate_queue_name(name), "stored", batch_size)

    def delete_all_jobs(self, name: str | None = None, *, batch_size: int = PURGE_BATCH_SIZE) -> int:
        """See Boss.delete_all_jobs()."""
        if name is not None:
            return self._purge(validate_queue_name(name), "all", batch_size)
        integer("batch_size", batch_size, minimum=1)
        names = [
            row[0]
            for row in self.context.all(queue_plans.get_queues(self.context.quoted_schema, by_name=False))
        ]
        return sum(self._purge(queue, "all", batch_size, missing_ok=True) for queue in names)

    def _purge(self, name: str, which: str, batch_size: int, *, missing_ok: bool = False) -> int:
        integer("batch_size", batch_size, minimum=1)
        context = self.context
        try:
            table = context.route(name).table
        except QueueNotFound:
            if missing_ok:
                return 0  # deleted since the list was read: nothing of it is left to purge
            raise
        schema = context.quoted_schema
        params: dict[str, Any] = {"name": name, "batch_size": batch_size}
        deleted = retained = 0
        after: Any = None
        try:
            while True:
                sql = edit_plans.purge_batch(schema, table, which=which, first=after is None)
                if after is not None:
                    params["after"] = after
                after, read, count, held = context.one(sql, params)
                deleted += count
                retained += held
                if read < batch_size:
                    return deleted
        finally:
            # Every job the batches deleted leaves total_count at once, and the completed and
            # cancelled ones retained_count held leave it too, as pg-boss 12.38's bulk deletes
            # do, also when a later batch failed: the batches before it have committed.
            if deleted:
                reduce_retained(context, name, retained=retained, removed=deleted)

    # -- blocked keys --------------------------------------------------------------------------

    def get_blocked_keys(self, name: str, *, limit: int | None = None, after: str | None = None) -> list[str]:
        """See Boss.get_blocked_keys()."""
        validate_queue_name(name)
        params = {
            "name": name,
            "limit": page_limit("get_blocked_keys()", limit),
            "after": page_after("get_blocked_keys()", after),
        }
        context = self.context
        route = context.route(name)
        if route.policy != QueuePolicy.KEY_STRICT_FIFO:
            raise WrongPolicy(
                f"get_blocked_keys() is only for key_strict_fifo queues; queue {name!r} is {route.policy}"
            )
        rows = context.all(
            edit_plans.blocked_keys(context.quoted_schema, route.table, after=after is not None), params
        )
        return [row[0] for row in rows]
