"""Issue 36 item 1: the dispatcher never runs more than the mission's cap (the deployment's
max_parallelism its mission.json kept when planned), whatever its control record says. A record
edited by hand above the cap is clamped and that is said once; one out of any deployment's range
(parallelism 10^12) is unreadable, said so clearly, the last good control kept, never "removed"."""

from __future__ import annotations

import json
import logging

from catchup_assets.core.dispatch.health import Watchdog
from catchup_assets.core.dispatch.mission_control import Cap, MissionControl
from catchup_assets.core.dispatch.obey import ControlReader
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.root import Store
from fakes import FakeBackend, FakeClock, Script
from kit.dispatch import mission_config

SPAN = MissionSpan(1, 64000, ledgers_per_range=6400)  # 10 ranges
CAP = 3  # the deployment's max_parallelism when the mission was planned


def hand_edited(parallelism, paused=False) -> bytes:
    """A record as an operator's editor leaves it: a value and no change in its history."""
    return json.dumps({"paused": paused, "parallelism": parallelism, "drain": False, "history": []}).encode()


def run(tmp_path, record: bytes, deployment: int | None = None):
    store = Store(tmp_path)
    cfg = MissionConfig("m1", SPAN, str(tmp_path), parallelism=2, poll_seconds=5)
    save_mission(store, cfg, max_parallelism=CAP)
    store.write_bytes(layout.control("m1"), record)
    clock = FakeClock()
    backend = FakeBackend(clock, lambda s: Script(seconds=30))
    heard: list[str] = []
    result = run_mission(
        prepare(cfg),
        backend,
        clock=clock,
        on_control=lambda c, what: heard.append(what),
        max_parallelism=deployment,
    )
    return result, backend, heard


def test_issue36_a_hand_edited_record_above_the_cap_is_clamped_and_said_once(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        result, backend, heard = run(tmp_path, hand_edited(100))
    assert len(result.done) == 10
    assert backend.max_live == CAP  # raised above the plan's 2, never past the cap
    (what,) = heard  # said once, on the first read, though read every pass
    assert "control record changed with no change in its history" in what
    assert f"its parallelism 100 is above the cap {CAP} (max_parallelism in " in what
    assert what.endswith(f"clamped to {CAP}")
    assert caplog.text.count("clamped to") == 1 and "control record removed" not in caplog.text


def test_issue36_the_deployments_cap_now_lowers_the_records(tmp_path):
    result, backend, heard = run(tmp_path, hand_edited(100), deployment=2)
    assert backend.max_live == 2 and "above the cap 2 (this deployment's mission_defaults.max_parallelism)" in heard[0]


def test_issue36_parallelism_10_12_is_unreadable_with_a_clear_message(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        result, backend, heard = run(tmp_path, hand_edited(10**12))
    assert len(result.done) == 10 and backend.max_live == 2  # the plan's: nothing obeyed of it
    assert heard == []  # no change told, and never "removed"
    warned = [r.getMessage() for r in caplog.records if "control record unreadable" in r.getMessage()]
    assert len(warned) == 1  # said once, not every pass
    assert f"control.json is not a control record: parallelism {10**12} is not an integer from 1 to 150000" in warned[0]


def test_issue36_an_unreadable_record_keeps_the_last_good_control(tmp_path):
    """The control reader against the file itself: a pause obeyed, the file edited to 10^12, the pause kept."""
    store = Store(tmp_path)
    cs = ControlStore(store, "m1")
    heard: list[str] = []
    dog = Watchdog(mission_config(), {}, None, FakeClock(), lambda c, p, w: None)
    reader = ControlReader("m1", 2, Cap(CAP, "the test's deployment"), cs.read, lambda c, w: heard.append(w), dog)
    cs.write(MissionControl().apply("pause", None, who="ops", at=1.0, max_parallelism=CAP))
    reader.read()
    store.write_bytes(layout.control("m1"), hand_edited(10**12))
    reader.read()
    reader.read()
    assert reader.control.paused and reader.live_cap() == 2 and heard == ["pause (by ops)"]
    # The status line (so the mission page's `control`) says the pause holds and why the new record did not take.
    assert reader.state().startswith("paused, parallelism 2; control record unreadable (the last good one kept): ")
    assert f"parallelism {10**12} is not an integer from 1 to 150000" in reader.state()
    store.write_bytes(layout.control("m1"), hand_edited(7, paused=True))  # readable, above the cap
    reader.read()
    assert reader.live_cap() == CAP and reader.state() == f"paused, parallelism {CAP} (planned 2)"
    assert heard[-1] == (
        "control record changed with no change in its history; "
        f"its parallelism 7 is above the cap {CAP} (the test's deployment): clamped to {CAP}"
    )


def test_issue36_an_unreadable_record_s_cause_is_bounded_where_it_is_shown(tmp_path, caplog):
    """A value of 4000 digits is quoted back by the record's check: the state line (the mission page's control,
    every pass) and the warning carry at most 300 characters of why."""
    store = Store(tmp_path)
    dog = Watchdog(mission_config(), {}, None, FakeClock(), lambda c, p, w: None)
    reader = ControlReader("m1", 2, Cap(CAP, "the test's deployment"), ControlStore(store, "m1").read, print, dog)
    store.write_bytes(layout.control("m1"), hand_edited(int("9" * 4000)))
    with caplog.at_level(logging.WARNING):
        reader.read()
    assert reader.state().startswith("control record unreadable (running as planned): ")
    assert len(reader.state()) <= len("control record unreadable (running as planned): ") + 300
    assert "9" * 300 not in caplog.text
