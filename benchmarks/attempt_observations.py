"""What the attempts' starts cost the Dagster instance: 2 observations an attempt, 4000 ranges.

range_catchup writes an AssetObservation on a range's partition when its attempt is submitted and
once when it runs (core/dispatch/live.py, defs/metadata/ranges.py). This logs exactly those, with
their real metadata, one by one through `context.log_event` (as range_catchup wrote them before
issue 26; it now writes them in batches off the dispatcher's thread, defs/mission/range_events.py, whose
cost on the launch benchmarks.dagster_backfill measures), from inside a run on a real SQLite
instance (the embedded default's), and times it against the same run logging nothing: the
event-log rows, the seconds, the bytes. Then
the read they add: `latest_marks` (defs/instance/ownership.py), which reads past them to a range's last
mark, over 4000 ranges whose newest word is an attempt's start (a run died with all in flight).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import dagster as dg

from benchmarks.harness.dagster_storage import instance_storage
from benchmarks.harness.report import write_result
from catchup_assets.core.dispatch.live import AttemptEvent
from catchup_assets.core.dispatch.ports import Phase
from catchup_assets.core.values.ledger_range import format_key
from catchup_assets.defs.instance.ownership import RANGE_KEY, latest_marks
from catchup_assets.defs.metadata.ranges import attempt_metadata

GiB = 1024**3


def keys(n: int) -> list[str]:
    return [format_key(i * 16000 + 1, (i + 1) * 16000) for i in range(n)]


def events(key: str) -> list[AttemptEvent]:
    """A range's attempt as the dispatcher tells it: submitted, then running on its node."""
    return [
        AttemptEvent(key, 1, Phase.PENDING, "subgiant", 6 * GiB, 5 * GiB, "spot"),
        AttemptEvent(key, 1, Phase.RUNNING, "subgiant", 6 * GiB, node="ip-10-0-12-34.ec2.internal", started_at=1.75e9),
    ]


def job(ranges: list[str], observe: bool) -> dg.JobDefinition:
    @dg.op(name="range_catchup_observations" if observe else "nothing_observed")
    def emit(context) -> None:  # no annotation: Dagster reads it, and this module defers them
        if not observe:
            return
        for key in ranges:
            for e in events(key):
                context.log_event(
                    dg.AssetObservation(asset_key=RANGE_KEY, partition=key, metadata=attempt_metadata("bench", e))
                )

    @dg.job(name="observed" if observe else "baseline")
    def run() -> None:
        emit()

    return run


def bench(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="python -m benchmarks.attempt_observations", description=__doc__)
    p.add_argument("--ranges", type=int, default=4000)
    p.add_argument("--smoke", action="store_true", help="40 ranges, for the tests")
    p.add_argument("--out", type=Path, default=None, help="where to write the result (default benchmarks/results)")
    args = p.parse_args(argv)
    n = 40 if args.smoke else args.ranges
    ranges = keys(n)
    with tempfile.TemporaryDirectory(prefix="attempt-obs-") as tmp:
        home = Path(tmp)
        with (
            instance_storage("sqlite", home) as storage,
            dg.DagsterInstance.local_temp(str(home), overrides=storage.overrides) as instance,
        ):
            timings = {}
            for observe in (False, True):
                before = storage.size_bytes()
                t0 = time.perf_counter()
                result = job(ranges, observe).execute_in_process(instance=instance)
                seconds = time.perf_counter() - t0
                assert result.success
                rows = len(instance.all_logs(result.run_id))
                timings[observe] = (seconds, rows, storage.size_bytes() - before)
            observed = instance.fetch_observations(dg.AssetRecordsFilter(asset_key=RANGE_KEY), limit=2 * n + 10)
            assert len(observed.records) == 2 * n, "every observation must be stored"
            t0 = time.perf_counter()
            marks = latest_marks(instance, ranges)
            marks_s = time.perf_counter() - t0
            assert marks == {}, "an attempt's start is no mark"
    (base_s, base_rows, base_bytes), (obs_s, obs_rows, obs_bytes) = timings[False], timings[True]
    added = obs_rows - base_rows
    rows = [
        ["run logging nothing (baseline)", base_rows, f"{base_s:.2f}", "", f"{base_bytes / 2**20:.1f}"],
        [f"run logging 2 x {n} attempt observations", obs_rows, f"{obs_s:.2f}", "", f"{obs_bytes / 2**20:.1f}"],
        [
            "**the observations' cost**",
            f"**{added}**",
            f"**{obs_s - base_s:.2f}**",
            f"{(obs_s - base_s) / max(added, 1) * 1e3:.2f}",
            f"{(obs_bytes - base_bytes) / 2**20:.1f}",
        ],
        [f"latest_marks over {n} ranges, each newest word an attempt's start", "", f"{marks_s:.2f}", "", ""],
    ]
    notes = (
        f"{n} ranges, one attempt each, so 2 x {n} observations (the least a mission logs: a retried range "
        "adds 2 per attempt). The run is in process, on the embedded default's SQLite instance "
        "(benchmarks/harness/dagster_storage.py); rows are the run's event-log entries; bytes the growth of the "
        "instance's history/ directory. The rest of a mission's event log, for comparison: one "
        "materialization per range, and Dagster's planned event per partition of the launch "
        "(benchmarks.dagster_backfill)."
    )
    write_result(
        "attempt_observations",
        f"Attempt observations at {n} ranges",
        [("Event log", ["run", "event-log rows", "seconds", "ms per row", "MiB"], rows)],
        notes,
        out_dir=args.out,
    )
    return {"added_rows": added, "observations": 2 * n, "seconds": obs_s - base_s, "marks_seconds": marks_s}


def main(argv: list[str] | None = None) -> int:
    bench(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
