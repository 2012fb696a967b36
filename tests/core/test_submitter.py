"""The submitter (core/dispatch/fill.py) alone, with the range book, claims, watchdog and stop it is
given, against the fake cluster: claim, durable sizing, then the submit (L11, L32), in order, and what
ends a pass's submits."""

from __future__ import annotations

import pytest

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.dispatch.attempt_spec import attempt_spec
from catchup_assets.core.dispatch.claims import ClaimBook
from catchup_assets.core.dispatch.fill import Submitter
from catchup_assets.core.dispatch.health import HEALTH_DISPATCH, Watchdog
from catchup_assets.core.dispatch.live import AttemptEvents
from catchup_assets.core.dispatch.ports import DispatchBlocked
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.dispatch.stopping import StopState
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.units import GiB
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from fakes import FakeBackend, FakeClock
from kit.dispatch import KEYS, RANGES, SPAN


class Blocking(FakeBackend):
    def submit(self, spec):
        if spec.range_key == KEYS[2]:
            raise DispatchBlocked("image pull refused")
        super().submit(spec)


def submitter(tmp_path, backend_cls=FakeBackend, faults=None, concurrency=1):
    clock = FakeClock()
    backend = backend_cls(clock, faults=faults or {})
    backend.submit_concurrency = concurrency
    records = RecordStore(Store(tmp_path / "root"), "m1")
    mission = MissionConfig("m1", SPAN, str(tmp_path / "root"), parallelism=10, poll_seconds=5)
    book = RangeBook(KEYS, records, "me", RetryPolicy(), 64 * GiB, lambda r, a: None)
    book.recover()
    health, events = [], []
    dog = Watchdog(mission, {r.key: r for r in RANGES}, None, clock, lambda *h: health.append(h))
    by_key = {r.key: r for r in RANGES}
    spec = lambda k, a, oom, ev, dis: attempt_spec(mission, None, {}, by_key[k], a, oom, ev, dis)  # noqa: E731
    stop = StopState(clock)
    sub = Submitter(
        backend, book, ClaimBook(book, records, clock, 120, 10), spec, AttemptEvents(events.append), stop, dog
    )
    return sub, backend, records, dog, stop, health, events


QUEUE = [(k, 1, 0, 0) for k in KEYS[:5]]

# (backend, its faults) -> submitted in order, told, the watchdog's block
CASES = [
    ("all five, in order", FakeBackend, {}, KEYS[:5], None),
    ("a transient error ends the pass's submits", FakeBackend, {"submit": 1}, [], None),
    (
        "a blocked dispatch blocks the mission after what went before",
        Blocking,
        {},
        KEYS[:2],
        "new dispatches stopped: image pull refused",
    ),
]


@pytest.mark.parametrize("why, backend_cls, faults, started, blocked", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("concurrency", [1, 4])
def test_L11_L13_submits_start_in_order_behind_their_claims(
    tmp_path, why, backend_cls, faults, started, blocked, concurrency
):
    sub, backend, records, dog, _, health, events = submitter(tmp_path, backend_cls, faults, concurrency)
    n = sub.fill(QUEUE)
    sub.close()
    submitted = [s.range_key for s in backend.submitted]
    if concurrency == 1:
        assert submitted == started and n == len(started)
    else:  # a wave at once: what started is a prefix of the queue's wave, each told in queue order
        assert set(started) <= set(submitted) <= set(KEYS[:5]) and n == len(submitted)
    assert [e.range_key for e in events] == [k for k in KEYS[:5] if k in submitted]  # each start told once
    assert dog.blocked == blocked and [h[0] for h in health] == ([HEALTH_DISPATCH] if blocked else [])
    for s in backend.submitted:  # the sizing was durable before the attempt existed
        assert records.read_one(s.range_key, 1).memory_limit_bytes == s.memory_limit_bytes
        assert records.claim_holder(s.range_key, 1) == "me"


def test_L37_a_stop_submits_nothing_more(tmp_path):
    sub, backend, *_, stop, _, _ = submitter(tmp_path)
    stop.stop()
    assert sub.fill(QUEUE) == 0 and backend.submitted == []


def test_L11_an_attempt_created_before_a_restart_is_adopted_not_told_twice(tmp_path):
    sub, backend, *_ = submitter(tmp_path)
    ok, told = sub.submit(KEYS[0], 1, 0)
    assert ok and told is backend.submitted[0]
    again, *_ = submitter(tmp_path)  # the same holder restarted over the same storage root
    again.backend = backend  # and the same cluster
    assert again.submit(KEYS[0], 1, 0) == (True, None) and len(backend.submitted) == 1


def test_L6_an_oom_climbs_the_memory_ladder_in_the_spec(tmp_path):
    sub, backend, *_ = submitter(tmp_path)
    sub.fill([(KEYS[0], 1, 0, 0), (KEYS[1], 3, 2, 0)])
    first, climbed = backend.submitted
    assert climbed.memory_limit_bytes > first.memory_limit_bytes
