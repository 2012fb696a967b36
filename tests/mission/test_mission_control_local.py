"""An operator controls a live mission on the local backend (real supervisors, the real worker,
the simulated stellar-core): pause, parallelism 2 -> 4 -> 1, resume, drain; with one dispatcher,
two on one mission, and one restarted at every change. Passes are driven here, one at a time,
so "within two passes" is counted, not timed."""

from __future__ import annotations

import time

import pytest

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.health import HEALTH_DISPATCH
from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.dispatch.obey import DRAINED
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.dispatch.results import RangeStatus
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.profile import build_profile
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import write_table
from scaled import scaled_placement

MiB = 1024**2
SPAN = MissionSpan(59_744_001, 59_968_000, ledgers_per_range=32_000, overlap=320)  # 7 ranges, ~2 s each
POLL = 0.1


class Operator:
    """A planned mission, its dispatchers (each with its own backend object, as separate runs
    have), and the operator's control record."""

    def __init__(self, tmp_path, dispatchers: int = 1):
        self.tmp = tmp_path
        self.cfg = MissionConfig(
            mission="ctl",
            span=SPAN,
            storage_root=str(tmp_path / "storage"),
            parallelism=2,
            placement=scaled_placement(64 * MiB, 4 * MiB),
            poll_seconds=POLL,
            env={"SIM_SPEED": "30000", "SIM_MEMORY_SCALE": "0.001"},
        )
        self.store = Store(self.cfg.storage_root)
        self.prepared = prepare(self.cfg)
        save_mission(self.store, self.cfg)
        write_table(self.store, layout.plan("ctl"), self.prepared.plan)
        self.records = RecordStore(self.store, "ctl")
        self.health: list[tuple[str, bool, str]] = []
        self.observer = LocalBackend(tmp_path / "work", "ctl")
        self.n = dispatchers
        self.generation = 0
        self.ds = self.start()

    def start(self) -> list[Dispatcher]:
        """Fresh dispatchers (a restart: nothing in memory survives), each with its own backend."""
        self.generation += 1
        return [
            Dispatcher(
                DispatchConfig(self.cfg, self.prepared.ordered, holder=f"run-{i}-{self.generation}"),
                LocalBackend(self.tmp / "work", "ctl", sample_interval=0.05),
                RecordStore(self.store, "ctl"),
                on_health=lambda *h: self.health.append(h),
                read_control=ControlStore(self.store, "ctl").read,
            )
            for i in range(self.n)
        ]

    def set(self, action: str, value: int | None = None) -> None:
        cs = ControlStore(self.store, "ctl")
        ctl = (cs.read() or MissionControl()).apply(action, value, who="test", at=time.time(), max_parallelism=8)
        cs.write(ctl)

    def step(self) -> int:
        """One pass of every dispatcher; the dispatchers' own count of this mission's live attempts."""
        statuses = [d.pass_once() for d in self.ds]
        self.last = statuses
        time.sleep(POLL)
        return max(s.in_flight + s.other_live for s in statuses)

    def live(self) -> int:
        return sum(1 for s in self.observer.observe() if s.live)

    def started(self) -> set[tuple[str, int]]:
        return set(self.records.load()[0])

    def done(self) -> set[str]:
        recs, marked = self.records.load()
        return {k for (k, a), r in recs.items() if (k, a) in marked and r.outcome == "ok"}

    def until(self, what, limit: float = 60.0) -> int:
        deadline = time.monotonic() + limit
        passes = 0
        while not what():
            assert time.monotonic() < deadline, "timed out"
            self.step()
            passes += 1
        return passes


@pytest.mark.parametrize("mode", ["one dispatcher", "two dispatchers", "restarted at every change"])
def test_L10_L11_pause_parallelism_lowered_and_resume_take_effect_within_two_passes(tmp_path, mode):
    op = Operator(tmp_path, dispatchers=2 if mode == "two dispatchers" else 1)
    restart = mode == "restarted at every change"

    def changed():
        if restart:
            op.ds = op.start()

    op.until(lambda: op.live() == 2)
    op.set("pause")
    changed()
    op.step()  # the pause is read on this pass
    in_flight = op.started()
    assert len(in_flight) == 2
    op.until(lambda: op.live() == 0)  # the attempts in flight finish...
    for _ in range(3):
        op.step()
    assert op.started() == in_flight  # ...and no new attempt started while paused
    marked = op.records.load()[1]
    assert in_flight <= marked and op.done() == {k for k, _ in in_flight}  # recorded
    assert any(h[0] == HEALTH_DISPATCH and not h[1] and h[2].startswith("paused") for h in op.health)

    op.set("resume")
    changed()
    assert 2 in [op.step() for _ in range(2)]  # within two passes
    op.set("parallelism", 4)
    changed()
    reached = [(op.step(), op.live()) for _ in range(2)]
    # within two passes, as the dispatchers count them and as the local backend's registry holds them
    assert any(counted == 4 and live == 4 for counted, live in reached), reached
    assert op.live() <= 4

    op.set("parallelism", 1)
    changed()
    before = op.started()
    while len(op.done()) < 7:
        live_before = op.live()
        op.step()
        new = op.started() - before
        before |= new
        # a new attempt starts only once the live ones fell below 1, and then one at a time
        assert not new or (live_before <= 1 and len(new) == 1 and op.live() <= 1)
    results = [d.run() for d in op.ds]  # resumed, the run ends: every range complete
    assert all(sorted(r.done) == sorted(op.prepared.keys) for r in results)
    assert len(op.started()) == 7  # one attempt per range, whoever dispatched it


def test_a_drained_mission_ends_with_nothing_condemned_and_a_later_run_completes_it(tmp_path):
    op = Operator(tmp_path)
    op.until(lambda: op.live() == 2)
    in_flight = {k for k, _ in op.started()}
    op.set("drain")
    (d,) = op.ds
    result = d.run()
    assert result.drained and result.condemned == {}
    assert set(result.done) == in_flight and op.done() == in_flight
    left = {k for k, r in result.results.items() if r.status is RangeStatus.NOT_RUN}
    assert left == set(op.prepared.keys) - in_flight and all(result.results[k].reason == DRAINED for k in left)
    assert {k for k, _ in op.started()} == in_flight  # the rest never started
    op.set("resume")
    (later,) = op.start()
    again = later.run()
    assert sorted(again.done) == sorted(op.prepared.keys) and not again.drained
    profile = build_profile(op.cfg.storage_root, "ctl").profile.to_pylist()
    assert sorted(r["range_key"] for r in profile) == sorted(op.prepared.keys)  # covers every range
