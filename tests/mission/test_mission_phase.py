"""Issue 46 item 4 (failure 4: `status` read "running as planned" for a mission that ended, was never started or
was drained, and "draining, ~14 min to go" after its drained run had ended): the mission's phase, as `status` and
the console say it, from the records the real dispatcher writes (run_mission over the fake backend), the control
record and the run's end (store/run_end.py)."""

from __future__ import annotations

import logging
import os
import signal

import pytest

from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.mission_status import mission_status
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import write_table
from fakes import FAILED, OK, FakeBackend, FakeClock, Script

SPAN = MissionSpan(1, 64000, ledgers_per_range=6400)  # 10 ranges, 2 at a time
FIRST = "0000000001-0000006400"


def planned(root):
    store = Store(root)
    cfg = MissionConfig("m1", SPAN, str(root), parallelism=2, poll_seconds=5, status_every=1)
    save_mission(store, cfg, max_parallelism=8)
    prepared = prepare(cfg)
    write_table(store, layout.plan("m1"), prepared.plan)
    return store, prepared


class Removing(FakeBackend):
    """Shuts down as the Kubernetes backend does: the Jobs deleted, the attempts gone from observe()."""

    def shutdown(self, grace):
        self.attempts = {k: a for k, a in self.attempts.items() if not self._state(a).live}
        return []


def control(store, **kw):
    ControlStore(store, "m1").write(MissionControl(**kw))  # as `catchup-assets control` writes it


def run(root, prepared, at_pass, script=lambda spec: Script(seconds=30)):
    """Run the mission; `at_pass(n, status)` on each pass, given mission_status then: the phases seen mid-run."""
    clock = FakeClock()
    seen: list[str] = []
    passes = iter(range(10**6))

    def on_status(_):
        n = next(passes)
        status = mission_status(str(root), "m1", clock.time())
        seen.append(status.phase)
        at_pass(n, status)

    run_mission(prepared, Removing(clock, script), clock=clock, on_status=on_status)
    return seen, mission_status(str(root), "m1", clock.time())


def nothing(n, status):
    pass


def pause_then_resume(store):
    def at(n, status):
        if n == 1:
            control(store, paused=True)
        if n == 4:
            control(store, paused=False)

    return at


def drain_at(store, at_n=1):
    def at(n, status):
        if n == at_n:
            control(store, drain=True)

    return at


def stop_at(at_n=1):
    def at(n, status):
        if n == at_n:
            os.kill(os.getpid(), signal.SIGTERM)  # an operator's stop, as the run worker gets it

    return at


# (what the operator does mid-run, the backend's script) -> phases seen while it ran, the phase after, its lines
CASES = [
    ("completed", lambda s: nothing, None, {"running"}, "completed", "time to go: nothing left"),
    ("paused, then resumed", pause_then_resume, None, {"running", "paused"}, "completed", "nothing left"),
    ("drained", drain_at, None, {"running", "draining"}, "drained", "ranges left for a later run"),
    ("stopped", lambda s: stop_at(), None, {"running"}, "stopped", "ranges left for a later run"),
    ("condemned", lambda s: nothing, lambda spec: Script(30, FAILED if spec.range_key == FIRST else OK), {"running"},
     "condemned", "nothing left"),
    # A circuit breaker ended the run (5 failures in a row, budgets kept): nothing dispatches it, nothing condemned.
    ("blocked", lambda s: nothing, lambda spec: Script(seconds=30, observation=FAILED), {"running"}, "stopped",
     ": blocked)"),
]  # fmt: skip


@pytest.mark.timeout(60)
@pytest.mark.parametrize("why, operator, script, during, after, said", CASES, ids=[c[0] for c in CASES])
def test_issue46_status_says_the_mission_s_phase_while_it_runs_and_after_its_run_ended(
    tmp_path, why, operator, script, during, after, said
):
    store, prepared = planned(tmp_path)
    seen, status = run(tmp_path, prepared, operator(store), *([script] if script else []))
    assert set(seen) >= during and set(seen) <= during | {after}, seen
    assert status.phase == after
    lines = "\n".join(status.lines())
    assert lines.startswith(f"mission m1: {after}") and said in lines
    assert "min to go" not in lines.split("time to go:")[1] if after != "completed" else True
    if after in ("drained", "stopped"):  # its run's end is said, with how it ended
        assert "(its run ended 2023-11-14 " in lines and f": {'blocked' if why == 'blocked' else after})" in lines
        assert "running as planned" not in lines and "draining" not in lines.splitlines()[0]


def test_issue46_a_mission_never_started_is_planned_with_no_time_to_go_promised(tmp_path):
    planned(tmp_path)
    status = mission_status(str(tmp_path), "m1")
    assert status.phase == "planned"
    assert status.lines()[0] == "mission m1: planned"
    assert any(line.startswith("time to go: not started; ") for line in status.lines())


def test_issue46_a_later_run_after_a_drain_is_running_again_not_drained(tmp_path):
    """The run end counts only until an attempt starts after it: resumed and run again, the mission runs."""
    store, prepared = planned(tmp_path)
    _, drained = run(tmp_path, prepared, drain_at(store))
    assert drained.phase == "drained"
    control(store, drain=False)  # resume
    seen, again = run(tmp_path, prepared, nothing)
    assert seen[0] == "running" and again.phase == "completed"


@pytest.mark.parametrize(
    "bad",
    [b"{not json", b'{"how": "vanished", "at": 1, "ranges": 1, "done": 0}', b'{"how": "drained", "at": "soon"}'],
    ids=["torn", "unknown-how", "at-not-a-time"],
)
def test_issue46_a_run_end_record_that_is_not_one_is_skipped_with_one_warning(tmp_path, caplog, bad):
    store, prepared = planned(tmp_path)
    _, drained = run(tmp_path, prepared, drain_at(store))
    store.write_bytes(layout.run_end("m1"), bad)
    with caplog.at_level(logging.WARNING, logger="catchup_assets.mission.mission_status"):
        status = mission_status(str(tmp_path), "m1")
    [warning] = [r.getMessage() for r in caplog.records if r.name == "catchup_assets.mission.mission_status"]
    assert "run_end.json" in warning and status.note and "run end record skipped" in status.note
    # Nothing in flight and the drain in force: still drained, read from the rest.
    assert status.phase == "drained"
