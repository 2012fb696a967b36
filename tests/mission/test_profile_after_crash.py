"""The profile after a dispatcher killed mid-mission (issue 26 item 6): the snapshot log it left,
plus the few record files no segment holds yet, give the profile a clean read of every file gives."""

from __future__ import annotations

import logging
import shutil

from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.values.ledger_range import dispatch_order
from catchup_assets.mission.profile import build_profile
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from fakes import DISRUPTED, OOM, FakeBackend, FakeClock, Script

SPAN = MissionSpan(1, 128000, ledgers_per_range=6400)  # 20 ranges
RANGES = dispatch_order(plan_ranges(SPAN))


def chains(spec):
    """Every third range is reclaimed, then OOMs, then completes on the resume (L21, L22)."""
    if int(spec.range_key[:10]) // 6400 % 3:
        return Script()
    return {1: Script(observation=DISRUPTED), 2: Script(observation=OOM)}.get(
        spec.attempt, Script(fresh_start=False, resumed_from=7)
    )


def killed_mid_mission(root, finished: int) -> RecordStore:
    """A dispatcher run until `finished` attempts are done, then abandoned (no closing snapshot)."""
    clock = FakeClock()
    records = RecordStore(Store(root), "m1")
    mission = MissionConfig("m1", SPAN, str(root), parallelism=4, poll_seconds=5)
    d = Dispatcher(DispatchConfig(mission, RANGES, segment_every=3), FakeBackend(clock, chains), records, clock=clock)
    while len(records.load()[1]) < finished:
        d.pass_once()
        clock.sleep(5)
    return records


def clean_profile(root, tmp_path):
    """The profile from every record file on its own: the attempts copied without any snapshot log."""
    clean = tmp_path / "clean"
    shutil.copytree(root / "m1/attempts", clean / "m1/attempts")
    return build_profile(str(clean), "m1").profile.to_pylist()


def test_issue26_item6_a_killed_run_profiles_as_a_clean_read_of_every_file(tmp_path):
    root = tmp_path / "root"
    records = killed_mid_mission(root, 20)
    assert len(records.snapshots.segments()) >= 6
    records.load()
    assert 0 < len(records.unsnapshotted) < 3  # fewer than segment_every finished since the last segment
    out = build_profile(str(root), "m1")
    assert out.profile.to_pylist() == clean_profile(root, tmp_path) and out.profile.num_rows > 0
    assert any(row["oom_count"] == 1 for row in out.profile.to_pylist())  # chains aggregated, not only singles
    records.load()
    assert records.unsnapshotted == []  # the build appended what it read from files: the next read is the log


def test_issue26_item6_L12_a_truncated_segment_still_profiles_right(tmp_path, caplog):
    root = tmp_path / "root"
    records = killed_mid_mission(root, 20)
    torn = records.snapshots.segments()[1]
    data = records.store.read_bytes(torn)
    records.store.write_bytes(torn, data[: len(data) // 2])
    with caplog.at_level(logging.WARNING):
        out = build_profile(str(root), "m1")
    assert out.profile.to_pylist() == clean_profile(root, tmp_path)
    assert any(records.store.url(torn) in m for m in caplog.messages)
