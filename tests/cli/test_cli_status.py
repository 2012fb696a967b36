"""`catchup-assets status MISSION`: the ranges by state, the time to go and the controls in force, read
from what the storage root holds (issue 36 item 4)."""

from __future__ import annotations

import re

import pytest

from catchup_assets.cli.main import run
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.units import GiB
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import write_table
from fakes import FakeBackend, FakeClock, Script

SPAN = MissionSpan(1, 64000, ledgers_per_range=6400)  # 10 ranges


def planned(root):
    store = Store(root)
    cfg = MissionConfig("m1", SPAN, str(root), parallelism=2, poll_seconds=5)
    save_mission(store, cfg, max_parallelism=8)
    prepared = prepare(cfg)
    write_table(store, layout.plan("m1"), prepared.plan)
    return store, [r.key for r in prepared.ordered], cfg


def status(root, capsys, mission="m1"):
    assert run(["status", mission, "--root", str(root)]) == 0
    return capsys.readouterr().out


def test_issue36_status_counts_each_range_in_one_state_from_the_records(tmp_path, capsys):
    store, keys, _ = planned(tmp_path)
    records = RecordStore(store, "m1")

    def record(key, attempt, done=True, **kw):
        records.write(AttemptRecord("m1", key, attempt, memory_limit_bytes=8 * GiB, **kw))
        if done:
            records.mark_done(key, attempt)

    record(keys[0], 1, outcome="ok", seconds=600.0)  # done
    record(keys[1], 1, outcome="failed")  # condemned: a failure of its own
    record(keys[2], 1, done=False, started_at=1.0)  # running
    record(keys[3], 1, done=False)  # sized and submitted, not started: pending
    record(keys[4], 1, outcome="stopped")  # stopped by an operator: a later run resumes it
    out = status(tmp_path, capsys)
    assert "ranges: 10, done 1, condemned 1, in flight 2, not started or waiting 6" in out
    assert "in flight: 1 running, 1 pending; stopped 1 (a later run resumes them); not started 5" in out
    # No profile, one range done in 600 s: the others are taken at that; 8 left over 2 slots after the
    # two in flight (one long past its 600 s: its floor).
    assert re.search(r"time to go: ~\d+ min to go \(p10 \d+ min, p90 \d+ min; pace x1\.00 of the profile\) at "
                     r"parallelism 2", out), out  # fmt: skip
    assert "mission m1: running\n" in out  # an attempt open, no run end: not "running as planned" (issue 46)


def test_issue36_status_of_a_finished_mission_has_nothing_left(tmp_path, capsys):
    store, _, cfg = planned(tmp_path)
    clock = FakeClock()
    run_mission(prepare(cfg), FakeBackend(clock, lambda s: Script(seconds=5)), clock=clock)
    out = status(tmp_path, capsys)
    assert "done 10, condemned 0, in flight 0" in out and "time to go: nothing left" in out


@pytest.mark.parametrize("args, said", [(["nope"], "nope"), (["m1", "--root", "/no/such/dir"], "--root")])
def test_issue36_status_refuses_an_unknown_mission_or_root_naming_it(tmp_path, capsys, args, said):
    planned(tmp_path)
    argv = ["status", *args] if "--root" in args else ["status", *args, "--root", str(tmp_path)]
    assert run(argv) != 0
    assert said in capsys.readouterr().err
