"""Profile and tier map from 4000 ranges x 3 attempts: cold from every record file, after a crash, warm.

The records are what a reclaimed-then-OOMed-then-resumed range leaves (three
attempts, a chain to aggregate: L21, L22), written by the real RecordStore to
a local directory. "After a crash" is the snapshot log as a dispatcher killed at
the worst moment leaves it (store/snapshot_log.py), profiled in a fresh process.
Targets (issue 26 item 6): after a crash 2 s or less; with the snapshot < 1 s.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import logging
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.harness.report import write_result
from catchup_assets.core.aggregate.profile_table import profile_rows
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.core.values.ledger_range import dispatch_order
from catchup_assets.mission.profile import build_profile, build_tier_map
from catchup_assets.sim.workload import Workload
from catchup_assets.store import layout
from catchup_assets.store.layout import SNAPSHOT_FILE
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.snapshot_log import COMPACT_AFTER_SEGMENTS
from catchup_assets.store.tables import plan_table, tier_map_table, write_table

MISSION = "bench"


def chain(c, t0: float) -> list[AttemptRecord]:
    """Reclaimed fresh start, an OOM on the resume, then a resume that completes."""
    k, first, length = c.key, c.range.first, c.range.length
    third = c.seconds / 3
    base = dict(
        mission=MISSION,
        range_key=k,
        memory_request_bytes=c.peak_anon_bytes * 2,
        tier="subgiant",
        node="ip-10-0-0-1",
        log_path=f"s3://bucket/{MISSION}/logs/{k}/a001.log.gz",
    )
    return [
        AttemptRecord(
            attempt=1,
            outcome="disrupted",
            exit_code=143,
            reason="DisruptionTarget",
            started_at=t0,
            finished_at=t0 + third,
            seconds=third,
            peak_anon_bytes=c.peak_anon_bytes,
            peak_working_set_bytes=c.peak_working_set_bytes,
            peak_ephemeral_bytes=c.peak_ephemeral_bytes,
            tx_apply_count=c.tx_apply_count // 3,
            tx_apply_seconds=third * 0.8,
            fresh_start=True,
            memory_limit_bytes=c.peak_anon_bytes * 2,
            **base,
        ),
        AttemptRecord(
            attempt=2,
            outcome="oom",
            exit_code=137,
            reason="OOMKilled",
            started_at=t0 + third + 60,
            finished_at=t0 + third + 120,
            seconds=60.0,
            peak_anon_bytes=c.replay_anon_bytes,
            fresh_start=False,
            resumed_from_ledger=first + length // 3,
            memory_limit_bytes=c.replay_anon_bytes,
            **base,
        ),
        AttemptRecord(
            attempt=3,
            outcome="ok",
            exit_code=0,
            reason="Completed",
            started_at=t0 + third + 180,
            finished_at=t0 + c.seconds + 180,
            seconds=2 * third,
            peak_anon_bytes=c.replay_anon_bytes,
            peak_working_set_bytes=c.peak_working_set_bytes,
            tx_apply_count=2 * c.tx_apply_count // 3,
            tx_apply_seconds=2 * third * 0.8,
            fresh_start=False,
            resumed_from_ledger=first + length // 3,
            memory_limit_bytes=int(c.replay_anon_bytes * 1.5),
            **base,
        ),
    ]


def timed(fn):
    t = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t


def hot_path(fn, lines: int = 8) -> str:
    prof = cProfile.Profile()
    prof.runcall(fn)
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).sort_stats("tottime").print_stats(lines)
    keep = [ln for ln in buf.getvalue().splitlines() if ln.strip() and not ln.startswith(("   Ordered", "   List"))]
    return "\n".join(keep[-(lines + 1) :])


# The after-crash profile build, in a fresh process: nothing warm but what is on disk.
FRESH = """
import json, sys, time
t0 = time.perf_counter()
from catchup_assets.core.size.sizing import Placement
from catchup_assets.mission.profile import build_profile, build_tier_map
import pandas  # what pyarrow's first pa.array of Python values imports anyway: timed with the imports
t1 = time.perf_counter()
build_profile(sys.argv[1], sys.argv[2])
build_tier_map(sys.argv[1], sys.argv[2], Placement())
print(json.dumps({"imports": t1 - t0, "seconds": time.perf_counter() - t1}))
"""


def fresh_process(root: str) -> dict:
    out = subprocess.run([sys.executable, "-c", FRESH, root, MISSION], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def clear_log(store: Store) -> None:
    store.remove(layout.snapshot(MISSION))
    store.remove(layout.segments(MISSION))


def dispatcher_log(records: RecordStore, recs: list[AttemptRecord], every: int, crash: bool) -> float:
    """The dispatcher's snapshot-log writes over the mission (a segment every `every` finished
    attempts, compacted as it goes), timed; `crash`: killed just before its last segment, so
    every - 1 finished records are left outside the log."""
    clear_log(records.store)
    last = len(recs) - (every - 1 if crash else 0)
    return sum(
        timed(lambda i=i: records.append_segment(recs[i : i + every]))[1] for i in range(0, last - last % every, every)
    )


def rewrite_every_250(records: RecordStore, recs: list[AttemptRecord]) -> float:
    """The policy before the log, timed: the whole snapshot rewritten every 250 finished attempts."""
    clear_log(records.store)
    rewrites = range(250, len(recs) + 1, 250)
    return sum(timed(lambda n=n: records.write_snapshot(*by_ident(recs[:n])))[1] for n in rewrites)


def by_ident(recs: list[AttemptRecord]):
    out = {(r.range_key, r.attempt): r for r in recs}
    return out, set(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_build", description=__doc__)
    p.add_argument("--ranges", type=int, default=4000)
    p.add_argument("--smoke", action="store_true", help="tiny sizes, for the tests")
    p.add_argument("--out", type=Path, default=None, help="directory for the result file")
    args = p.parse_args(argv)
    if args.smoke:
        args.ranges = 40
    logging.getLogger("catchup_assets").setLevel(logging.ERROR)
    w = Workload(ranges=args.ranges)
    placement = Placement()
    every = DispatchConfig.__dataclass_fields__["segment_every"].default
    with tempfile.TemporaryDirectory() as root:
        store = Store(root)
        records = RecordStore(store, MISSION)
        serial = RecordStore(store, MISSION, parallel=False)
        ordered = dispatch_order([c.range for c in w], "tip-first")
        write_table(store, layout.plan(MISSION), plan_table(ordered, 320, None, placement))
        started = time.perf_counter()
        recs = [r for c in w for r in chain(c, 1.75e9)]
        for r in recs:
            records.write(r)
            records.mark_done(r.range_key, r.attempt)
        write_s = time.perf_counter() - started

        def pure():
            rows, _ = profile_rows(recs)
            return tier_map_table([c.range for c in w], rows, placement)

        def both():
            build_profile(root, MISSION)
            return build_tier_map(root, MISSION, placement)

        _, pure_s = timed(pure)
        listing = store.find(layout.attempts(MISSION))
        _, list_s = timed(lambda: store.find(layout.attempts(MISSION)))
        (loaded, _), load_serial_s = timed(serial.load)
        assert len(loaded) == len(recs), "every record must load"
        (loaded, _), load_pool_s = timed(records.load)
        assert len(loaded) == len(recs), "every record must load on the pool"
        _, cold_s = timed(both)  # appends what it read as a segment on its way
        assert store.find(layout.segments(MISSION)), "the cold build leaves its records in the log"
        # The mission again, its snapshot log kept as the dispatcher keeps it, killed at the worst
        # moment: just before a segment, with the most segments since a compaction.
        upkeep_s = dispatcher_log(records, recs, every, crash=False)
        old_upkeep_s = rewrite_every_250(records, recs)
        dispatcher_log(records, recs, every, crash=True)
        segments = len(store.find(layout.segments(MISSION)))
        records.load()
        outside = len(records.unsnapshotted)
        crash = fresh_process(root)
        records.write_snapshot(*records.load())  # the mission run's end: one compaction
        _, load_warm_s = timed(records.load)
        _, warm_s = timed(both)
        fresh_warm = fresh_process(root)
        clear_log(store)
        cold_profile = hot_path(serial.load)
        records.write_snapshot(*records.load())
        warm_profile = hot_path(both)
    n = len(recs)

    def row(what: str, seconds: float, per: str | None = None) -> list[str]:
        return [what, f"{seconds:.3f}", per or f"{seconds / n * 1e6:.0f}"]

    rows = [
        row("aggregation only (records in memory -> profile rows -> tier map)", pure_s),
        row("listing the attempts directory", list_s, f"{list_s / len(listing) * 1e6:.0f} per file"),
        row("load every record from its own file, one by one (no snapshot log)", load_serial_s),
        row("load every record from its own file, on the process pool (no snapshot log)", load_pool_s),
        row("profile + tier map, cold (no snapshot log at all)", cold_s),
        row(
            f"profile + tier map after a crash, fresh process (base + {segments} segments + {outside} files)",
            crash["seconds"],
        ),
        row("profile + tier map with the snapshot, fresh process", fresh_warm["seconds"]),
        row("load with the snapshot", load_warm_s),
        row("profile + tier map with the snapshot (as after a mission run)", warm_s),
    ]
    notes = (
        f"{args.ranges} ranges x 3 attempts = {n} records ({len(listing)} files with the done marks) on a local "
        f"directory; writing them took {write_s:.0f} s. The dispatcher appends a segment of every {every} finished "
        f"attempts to the snapshot log and compacts at {COMPACT_AFTER_SEGMENTS} segments and at the run's end "
        f"({SNAPSHOT_FILE}); every profile build appends what it read from files. Over the whole mission the "
        f"log's upkeep took {upkeep_s:.2f} s, against {old_upkeep_s:.2f} s for the policy before it (the whole "
        f"snapshot rewritten every 250). The fresh processes' imports took {crash['imports']:.2f} s "
        "(not in the rows; with pandas, which pyarrow imports on its first pa.array of Python values, "
        "and compiled from source when PYTHONDONTWRITEBYTECODE is set, as on the machine these figures came from); "
        "the files are in the page cache in every row.\n\n"
        "Hot path, cold load one by one (cProfile, by own time):\n\n```\n" + cold_profile + "\n```\n\n"
        "Hot path, profile + tier map with the snapshot:\n\n```\n" + warm_profile + "\n```"
    )
    write_result(
        "profile_build",
        "Profile + tier map from 4000 ranges x 3 attempts",
        [("Seconds (wall)", ["step", "seconds", "us per record"], rows)],
        notes,
        out_dir=args.out,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
