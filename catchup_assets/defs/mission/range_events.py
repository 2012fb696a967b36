"""What range_catchup writes of each range while it runs: its attempts' starts and, in subset mode, its planned row.

Pinned to dagster 1.13.27 and dagster-postgres 0.29.27: every name from `dagster._core` and
`dagster._time` here is internal; tests/defs/test_range_events.py fails if an upgrade changes what
this relies on (what the status cache reads, and how these rows show).

Planned rows (issue 26). With Dagster's `DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS`, creating a
4000-range run writes one ASSET_MATERIALIZATION_PLANNED event instead of 4000 (60-110 s of a launch on
Postgres). But the status cache (`_core/storage/partition_status_cache.py`,
`build_failed_and_in_progress_partition_subset`) reads per-partition planned rows only: a partition
whose newest row is a planned one is in progress while its run is unfinished and FAILED once the run
fails. So the run writes that row itself for each range it starts, and, as the step raises, for
each range it leaves unfinished. Nothing public writes one in 1.13.27: `log_event` and
`report_runless_asset_event` take materializations, observations and check results only
(dagster-io/dagster#28113 made per-partition rows the default for this marking; #29288 added the
switch, accepting unmarked partitions; #32242, open, is a 2000-partition run timing out on them).

Attempt starts (issue 23) are the observations `context.log_event` would write, built as
`DagsterEvent.from_step` builds them, without its synchronous write: on Postgres each write is two
new connections under `NullPool` (~20 ms), 2000 of them held the first pass ~50 s.

Both go through mission/range_writer.py, in batches off the dispatcher's thread, a batch in one
transaction a table as dagster-postgres's `store_event_batch` writes observations (its planned
events it writes one by one, as SQLite writes everything: a commit, an fsync, each).

Off the thread is not enough under CPython's GIL. A thread that returns from I/O (an fsync, an API
call) waits for the GIL until the thread holding it drops it, which a busy thread does only every
switch interval (5 ms, `sys.getswitchinterval`). Measured here: a loop of fsyncs went from 0.5 to
12.7 ms an operation beside a thread serializing without pause, and the dispatcher's first pass
from ~5 to 8-17 ms a submit. So the writer does its CPU work in slices well under 1 ms (one row
serialized, `SLICE` rows sent) and yields the GIL between them (`time.sleep(0)`): 0.65 ms an
operation in the same loop.
"""

from __future__ import annotations

import logging
import os
import time

import dagster as dg
from dagster._core.events import (
    AssetMaterializationPlannedData,
    AssetObservationData,
    DagsterEvent,
    DagsterEventType,
)
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.event_log import SqlEventLogStorage
from dagster._core.storage.event_log.schema import SqlEventLogStorageTable
from dagster._time import get_current_timestamp

from catchup_assets.mission.range_writer import MARK, RangeWriter

# Dagster's own switch, read where runs are created (the daemon, the webserver): set in their
# environment by the deployment (charts/dagster-values.yaml) and by the demo, never at import.
SUBSET_ENV = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"
SLICE = 10  # rows per INSERT statement: ~0.5 ms of the GIL to send them
# executemany with RETURNING: SQLAlchemy compiles it once and sends each slice as one INSERT of many VALUES.
_INSERT = SqlEventLogStorageTable.insert().returning(SqlEventLogStorageTable.c.id, sort_by_parameter_order=True)


def planned_as_subset(instance: dg.DagsterInstance, run_id: str, asset_key: dg.AssetKey) -> bool:
    """Whether the instance planned this run's `asset_key` as one partition subset (then its ranges need their rows)."""
    # The run's planned events come first in its log, one per asset (run_domain.py, sorted by key).
    conn = instance.get_records_for_run(run_id, of_type=DagsterEventType.ASSET_MATERIALIZATION_PLANNED, limit=20)
    for record in conn.records:
        event = record.event_log_entry.dagster_event
        data = event.event_specific_data if event is not None else None
        if isinstance(data, AssetMaterializationPlannedData) and data.asset_key == asset_key:
            return data.partitions_subset is not None
    return False


class RangeEvents:
    """One run's writer of its ranges' rows; `close` writes what is left, and the unfinished ranges of a failed step."""

    def __init__(self, context: dg.AssetExecutionContext) -> None:
        self.instance, self.run_id, self.asset_key = context.instance, context.run.run_id, context.asset_key
        self.step = context.get_step_execution_context()
        self.subset = planned_as_subset(self.instance, self.run_id, self.asset_key)
        self.writer = RangeWriter(self._write)
        self.keys: list[str] = list(context.partition_keys)  # the ranges this run was given to run
        self.spared: set[str] = set()  # left unstarted by a drain: not failed, as per partition

    def started(self, key: str, observation: dg.AssetObservation) -> None:
        """An attempt of `key` started (on the dispatcher's thread): its observation, and the range's mark once."""
        if self.subset:
            self.writer.mark(key)
        self.writer.add(key, self._entry(DagsterEventType.ASSET_OBSERVATION, AssetObservationData(observation)))

    def finished(self, key: str) -> None:
        """Before the range's materialization is logged: its rows land first, its mark is older or never."""
        self.writer.done(key)

    def condemned(self, key: str) -> None:
        """Before the range's failure observation is logged: its attempts' rows land first, so it is the latest."""
        self.writer.settle(key)  # its mark stays: the step's failure shows the range FAILED

    def close(self, failed: bool) -> None:
        # The writer marks none of these it has seen done.
        left = [k for k in self.keys if k not in self.spared] if failed and self.subset else []
        self.writer.close(also=left)

    def _entry(self, kind: DagsterEventType, data) -> EventLogEntry:
        # As DagsterEvent.from_step builds the event and construct_event_record the entry (1.13.27).
        step = self.step
        event = DagsterEvent(
            event_type_value=kind.value,
            job_name=step.job_name,
            step_handle=step.step.handle,
            node_handle=step.step.node_handle,
            step_kind_value=step.step.kind.value,
            logging_tags=step.event_tags,
            event_specific_data=data,
            pid=os.getpid(),
        )
        return EventLogEntry(
            user_message=event.message or f"{kind.value} for step {step.step.key}",
            level=logging.DEBUG,
            job_name=step.job_name,
            run_id=self.run_id,
            error_info=None,
            timestamp=get_current_timestamp(),
            step_key=step.step.key,
            dagster_event=event,
        )

    def _write(self, items) -> None:
        planned, rows = [], []
        for kind, k, row in items:
            if kind == MARK:
                data = AssetMaterializationPlannedData(self.asset_key, partition=k)
                planned.append(self._entry(DagsterEventType.ASSET_MATERIALIZATION_PLANNED, data))
                _yield_gil()
            else:
                rows.append(row)
        storage = self.instance.event_log_storage
        for entries in (planned, rows):  # one kind a group: the asset's index row is updated from each's last
            if not entries:
                continue
            if isinstance(storage, SqlEventLogStorage):
                _insert_batch(storage, entries)
            else:
                for entry in entries:
                    storage.store_event(entry)
                    _yield_gil()


def _yield_gil() -> None:
    time.sleep(0)  # lets a thread waiting for the GIL (the dispatcher, back from I/O) take it now


def _insert_batch(storage: SqlEventLogStorage, entries: list[EventLogEntry]) -> None:
    """`entries` of one kind and asset as `store_event` each would store them, in two transactions.

    As 1.13.27 stores asset events: the rows into the run's log, then, where the log is sharded by
    run (the embedded default's SQLite), the same rows into the index shard too; then the rows'
    indexed tags and the asset's index row, from the last (as dagster-postgres's `store_event_batch`).
    """
    values = []
    for entry in entries:
        values.append(storage._event_to_row(entry))  # its serialize_value: ~0.1 ms a row
        _yield_gil()
    with storage.run_connection(entries[0].run_id) as conn:
        ids = _insert(conn, values)
    with storage.index_transaction() as conn:
        if storage.is_run_sharded:
            ids = _insert(conn, values)  # the index shard's copy: the ids its index rows name
        storage._store_asset_event_tags(conn, entries, ids)  # none for these rows today
        storage._store_asset_event(conn, entries[-1], ids[-1])


def _insert(conn, values: list[dict]) -> list[int]:
    ids: list[int] = []
    for i in range(0, len(values), SLICE):
        ids += [int(row[0]) for row in conn.execute(_INSERT, values[i : i + SLICE])]
        _yield_gil()
    return ids
