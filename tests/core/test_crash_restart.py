"""T2: crash the dispatcher at every side-effect boundary, restart it, compare.

A clean run of a small mission counts its side effects (record writes, done
marks, submits, releases). Then, for every k, a run dies at the k-th side
effect and a fresh dispatcher takes over from storage and the backend alone.
Nothing may be lost, nothing may run twice at once, nothing double-counted.
"""

import pytest

from catchup_assets.core.aggregate.profile_table import profile_rows
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.values.ledger_range import dispatch_order
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from fakes import DISRUPTED, OOM, FakeBackend, FakeClock, Script

SPAN = MissionSpan(1, 19200, ledgers_per_range=6400)
RANGES = dispatch_order(plan_ranges(SPAN))
KEYS = [r.key for r in RANGES]
TABLE = {(KEYS[0], 1): Script(observation=DISRUPTED, seconds=20), (KEYS[1], 1): Script(observation=OOM, seconds=7)}


class Crash(BaseException):  # a kill: no handler of the dispatcher sees it
    pass


class Boundaries:
    """Counts side effects and raises Crash at the k-th one."""

    def __init__(self, crash_at=None):
        self.n = 0
        self.crash_at = crash_at

    def wrap(self, obj, name):
        real = getattr(obj, name)

        def hook(*args, **kwargs):
            self.n += 1
            if self.n == self.crash_at:
                raise Crash(f"{name} #{self.n}")
            return real(*args, **kwargs)

        setattr(obj, name, hook)


def dispatcher(root, backend, clock, boundaries=None):
    records = RecordStore(Store(root), "m1")
    if boundaries:
        for name in ("write", "mark_done"):
            boundaries.wrap(records, name)
    # One holder across the restart, as a retried step of one Dagster run: it takes its claims back.
    cfg = DispatchConfig(MissionConfig("m1", SPAN, str(root), parallelism=2, poll_seconds=5), RANGES, holder="run-1")
    return Dispatcher(cfg, backend, records, clock=clock), records


def comparable(records):
    rows, unmeasured = profile_rows(records.load()[0].values())
    drop = {"wall_seconds"}
    return [{k: v for k, v in r.items() if k not in drop} for r in rows], unmeasured


def clean_run(tmp_path):
    clock = FakeClock()
    backend = FakeBackend(clock, lambda s: TABLE.get((s.range_key, s.attempt), Script()))
    b = Boundaries()
    for name in ("submit", "release", "release_range"):
        b.wrap(backend, name)
    d, records = dispatcher(tmp_path / "clean", backend, clock, b)
    d.run()
    return b.n, comparable(records), len(backend.submitted)


def test_T2_crash_at_every_side_effect_boundary_then_restart(tmp_path):
    total, expected, n_submits = clean_run(tmp_path)
    assert total > 20 and expected[1] == []
    for k in range(1, total + 1):
        clock = FakeClock()
        backend = FakeBackend(clock, lambda s: TABLE.get((s.range_key, s.attempt), Script()))
        b = Boundaries(crash_at=k)
        for name in ("submit", "release", "release_range"):
            b.wrap(backend, name)
        root = tmp_path / f"crash{k}"
        try:
            d, _ = dispatcher(root, backend, clock, b)
            d.run()
        except Crash:
            pass
        else:
            pytest.fail(f"boundary {k} was never reached")
        clock.sleep(3)
        b.crash_at = None  # the restarted process does not crash
        d2, records = dispatcher(root, backend, clock)
        result = d2.run()
        assert sorted(result.done) == sorted(KEYS), k
        ids = [s.attempt_id for s in backend.submitted]
        assert len(ids) == len(set(ids)) == n_submits, (k, ids)  # nothing ran twice
        assert comparable(records) == expected, k  # nothing lost, nothing double-counted
        assert backend.attempts == {}, k  # every finished attempt released (L2)
        assert set(KEYS) <= set(backend.released_ranges), k  # every data dir freed (L3)
