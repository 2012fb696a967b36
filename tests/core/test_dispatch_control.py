"""The dispatcher obeys the operator's control record within two passes: pause, parallelism,
drain; two dispatchers on one mission, and one restarted, obey the same record (fake backend, fake clock)."""

from __future__ import annotations

import logging

from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.health import HEALTH_DISPATCH
from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.dispatch.obey import DRAINED
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.dispatch.results import RangeStatus
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.values.ledger_range import dispatch_order
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from fakes import FakeBackend, FakeClock, Script

SPAN = MissionSpan(1, 64000, ledgers_per_range=6400)  # 10 ranges
RANGES = dispatch_order(plan_ranges(SPAN))
KEYS = [r.key for r in RANGES]
CAP = 8


class Mission:
    """One mission's storage root and fake cluster, and its dispatchers."""

    def __init__(self, tmp_path, seconds=30.0):
        self.clock = FakeClock()
        self.backend = FakeBackend(self.clock, lambda spec: Script(seconds=seconds))
        self.store = Store(tmp_path / "root")
        self.control = ControlStore(self.store, "m1")
        self.health: list[tuple[str, bool, str]] = []
        self.seen: list[str] = []

    def dispatcher(self, holder: str) -> Dispatcher:
        mission = MissionConfig("m1", SPAN, self.store.root, parallelism=2, poll_seconds=5)
        return Dispatcher(
            DispatchConfig(mission, RANGES, holder=holder),
            self.backend,
            RecordStore(self.store, "m1"),
            clock=self.clock,
            on_health=lambda *h: self.health.append(h),
            read_control=ControlStore(self.store, "m1").read,  # each dispatcher reads the file itself
            on_control=lambda ctl, what: self.seen.append(what),
        )

    def set(self, action: str, value: int | None = None) -> None:
        current = self.control.read() or MissionControl()
        self.control.write(current.apply(action, value, who="ops", at=self.clock.time(), max_parallelism=CAP))

    def step(self, *dispatchers: Dispatcher, passes: int = 1) -> None:
        for _ in range(passes):
            for d in dispatchers:
                d.pass_once()
            self.clock.sleep(5)

    def live(self) -> int:
        return len(self.backend.live_keys())

    def recorded(self) -> set[tuple[str, int]]:
        return RecordStore(self.store, "m1").load()[1]


def test_pause_holds_new_attempts_in_flight_ones_finish_and_resume_dispatches(tmp_path):
    m = Mission(tmp_path)
    d = m.dispatcher("a")
    m.step(d)
    assert m.live() == 2
    in_flight = {(s.range_key, s.attempt) for s in m.backend.observe()}
    m.set("pause")
    submitted = len(m.backend.submitted)
    assert "; paused, parallelism 2;" in d.pass_once().line()  # what the status line says
    m.step(d, passes=12)  # 60 s: every attempt in flight has ended
    assert len(m.backend.submitted) == submitted and m.live() == 0  # nothing new while paused
    assert in_flight <= m.recorded()  # ...and the ones in flight finished and were recorded
    assert [h for h in m.health if h[0] == HEALTH_DISPATCH] == [
        (HEALTH_DISPATCH, False, "paused by an operator: pause (by ops)")
    ]
    m.set("resume")
    m.step(d, passes=2)
    assert m.live() == 2 and m.health[-1][:2] == (HEALTH_DISPATCH, True)
    assert m.seen == ["pause (by ops)", "resume (by ops)"]  # each change seen once


def test_parallelism_raised_reaches_the_cap_within_two_passes_and_lowered_stops_nothing(tmp_path):
    m = Mission(tmp_path, seconds=30.0)
    d = m.dispatcher("a")
    m.step(d)
    assert m.live() == 2
    m.set("parallelism", 4)
    m.step(d, passes=2)
    assert m.live() == 4
    m.set("parallelism", 1)
    m.step(d)
    assert m.live() == 4  # lowering kills no running attempt
    new_while_live = []
    for _ in range(16):
        before = len(m.backend.submitted)
        m.step(d)
        if len(m.backend.submitted) > before:
            new_while_live.append(m.live())
    # no new attempt until live attempts fell below 1; then one at a time
    assert new_while_live and all(n == 1 for n in new_while_live)
    m.set("parallelism", 3)
    result_d = m.dispatcher("a")  # the same run restarted reads the same record
    result = result_d.run()
    assert sorted(result.done) == sorted(KEYS) and m.backend.max_live == 4


def test_L11_two_dispatchers_obey_one_record_and_share_its_live_parallelism(tmp_path):
    m = Mission(tmp_path)
    a, b = m.dispatcher("a"), m.dispatcher("b")
    m.step(a, b)
    assert m.live() == 2  # one parallelism across both (L11)
    m.set("parallelism", 4)
    m.step(a, b, passes=2)
    assert m.live() == 4
    m.set("pause")
    submitted = len(m.backend.submitted)
    m.step(a, b, passes=10)
    assert len(m.backend.submitted) == submitted and m.live() == 0
    m.set("resume")
    for _ in range(200):
        m.step(a, b)
        if all(k in a.book.results or k in b.book.results for k in KEYS) and not m.live():
            break
    done = {(k, 1) for k in KEYS}
    assert done <= m.recorded() and len(m.recorded()) == len(KEYS)  # every range once, no duplicate attempt
    assert m.backend.max_live <= 4


def test_L10_a_restarted_dispatcher_obeys_the_record_from_its_first_pass(tmp_path):
    m = Mission(tmp_path)
    first = m.dispatcher("a")
    m.step(first)
    m.set("pause")
    m.step(first, passes=8)
    submitted = len(m.backend.submitted)
    restarted = m.dispatcher("a")  # the process died; its successor knows nothing in memory
    m.step(restarted, passes=3)
    assert len(m.backend.submitted) == submitted
    m.set("resume")
    result = restarted.run()
    assert sorted(result.done) == sorted(KEYS) and not result.drained


def test_drain_ends_the_run_resumable_and_a_later_run_completes_it(tmp_path):
    m = Mission(tmp_path)
    d = m.dispatcher("a")
    m.step(d)
    in_flight = set(m.backend.live_keys())
    m.set("drain")
    result = d.run()
    assert result.drained and result.condemned == {}
    assert set(result.done) == in_flight  # the ones in flight finished
    left = {k for k, r in result.results.items() if r.status is RangeStatus.NOT_RUN}
    assert left == set(KEYS) - in_flight and all(result.results[k].reason == DRAINED for k in left)
    assert {k for k, _ in m.recorded()} == in_flight  # the rest never started
    m.set("resume")
    later = m.dispatcher("b").run()
    assert sorted(later.done) == sorted(KEYS) and not later.drained


def test_L12_a_torn_record_keeps_the_last_good_control_and_is_said_once(tmp_path, caplog):
    m = Mission(tmp_path)
    d = m.dispatcher("a")
    m.set("pause")
    m.step(d)
    assert m.live() == 0
    m.store.write_bytes(layout.control("m1"), b'{"paused": fal')
    with caplog.at_level(logging.WARNING):
        m.step(d, passes=3)
    assert m.live() == 0  # still paused
    assert sum("control record unreadable" in r.getMessage() for r in caplog.records) == 1
    m.store.remove(layout.control("m1"))  # no record: run as planned
    m.step(d)
    assert m.live() == 2
