"""Profile and tier map from 4000 ranges x 3 attempts: cold from every record file, and from the snapshot.

The records are what a reclaimed-then-OOMed-then-resumed range leaves (three
attempts, a chain to aggregate: L21, L22), written by the real RecordStore to
a local directory. Target: profile + tier map < 1 s.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import logging
import pstats
import tempfile
import time
from pathlib import Path

from benchmarks.report import write_result
from catchup_assets.core.aggregate.profile import profile_rows
from catchup_assets.core.dispatch.reconciler import DispatchConfig
from catchup_assets.core.dispatch.record import AttemptRecord
from catchup_assets.core.plan.ranges import dispatch_order
from catchup_assets.core.size.sizing import Placement
from catchup_assets.mission.profile import build_profile, build_tier_map
from catchup_assets.sim.workload import Workload
from catchup_assets.store import layout
from catchup_assets.store.layout import SNAPSHOT_FILE
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
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
    with tempfile.TemporaryDirectory() as root:
        store = Store(root)
        records = RecordStore(store, MISSION)
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
        (loaded, _), load_cold_s = timed(records.load)
        assert len(loaded) == len(recs), "every record must load"
        _, cold_s = timed(both)  # writes the snapshot on its way
        assert store.exists(f"{MISSION}/{SNAPSHOT_FILE}")
        _, load_warm_s = timed(records.load)
        _, warm_s = timed(both)
        profile = both
        # A run killed between two snapshots (DispatchConfig.snapshot_every finished attempts):
        # the snapshot lacks at most that many records, which are read from their own files.
        every = DispatchConfig.__dataclass_fields__["snapshot_every"].default
        store.remove(f"{MISSION}/{SNAPSHOT_FILE}")
        all_recs, all_done = records.load()
        last = set(sorted(all_done)[-(every - 1) :])
        records.write_snapshot(all_recs, all_done - last)
        _, crash_s = timed(both)
        store.remove(f"{MISSION}/{SNAPSHOT_FILE}")
        cold_profile = hot_path(records.load)
        records.write_snapshot(*records.load())
        warm_profile = hot_path(profile)
    n = len(recs)
    rows = [
        [
            "aggregation only (records in memory -> profile rows -> tier map)",
            f"{pure_s:.3f}",
            f"{pure_s / n * 1e6:.0f}",
        ],
        ["listing the attempts directory", f"{list_s:.3f}", f"{list_s / len(listing) * 1e6:.0f} per file"],
        ["load every record from its own file (no snapshot)", f"{load_cold_s:.3f}", f"{load_cold_s / n * 1e6:.0f}"],
        ["profile + tier map, cold (no snapshot at all)", f"{cold_s:.3f}", f"{cold_s / n * 1e6:.0f}"],
        [
            f"profile + tier map after a crash, snapshot {every - 1} finished attempts behind",
            f"{crash_s:.3f}",
            f"{crash_s / n * 1e6:.0f}",
        ],
        ["load with the snapshot", f"{load_warm_s:.3f}", f"{load_warm_s / n * 1e6:.0f}"],
        ["profile + tier map with the snapshot (as after a mission run)", f"{warm_s:.3f}", f"{warm_s / n * 1e6:.0f}"],
    ]
    notes = (
        f"{args.ranges} ranges x 3 attempts = {n} records ({len(listing)} files with the done marks) on a local "
        f"directory; writing them took {write_s:.0f} s. A mission run ends by writing the snapshot "
        f"({SNAPSHOT_FILE}), and so does every profile build.\n\n"
        "Hot path, cold load (cProfile, by own time):\n\n```\n" + cold_profile + "\n```\n\n"
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
