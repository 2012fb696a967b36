"""The stop (core/dispatch/stopping.py) alone: the flag a signal handler sets, and the shutdown of the
attempts in flight, each recorded once, charged to no budget (L37)."""

from __future__ import annotations

import pytest

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.core.dispatch.finish import Finisher
from catchup_assets.core.dispatch.ports import AttemptSpec, TransientBackendError
from catchup_assets.core.dispatch.range_book import RangeBook
from catchup_assets.core.dispatch.stopping import StopState, stop_attempts
from catchup_assets.core.units import GiB
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from fakes import FakeBackend, FakeClock, Script
from kit.dispatch import KEYS


class Sleepy:
    woken = False


def test_L37_the_first_stop_s_reason_stands_and_wakes_a_sleeping_clock():
    clock = Sleepy()
    stop = StopState(clock)
    assert (stop.requested, stop.why) == (False, None)
    stop.stop("SIGTERM")
    stop.stop("SIGINT")
    assert (stop.requested, stop.why, clock.woken) == (True, "SIGTERM", True)


class Removing(FakeBackend):
    """Shuts down as the Kubernetes backend does: the Jobs deleted, the attempts gone from observe()."""

    def shutdown(self, grace):
        self.attempts = {k: a for k, a in self.attempts.items() if not self._state(a).live}
        return []


class Lingering(FakeBackend):
    """Removes all but one attempt, which outlives the grace every time."""

    def shutdown(self, grace):
        live = [a for a in self.attempts.values() if self._state(a).live]
        self.attempts = {k: a for k, a in self.attempts.items() if a not in live[1:]}
        return [a.spec.attempt_id for a in live[:1]]


class Throttled(FakeBackend):
    """Cannot shut down now: the API server asks it to slow down past a pass's budget (issue 36 item 8)."""

    def shutdown(self, grace):
        raise TransientBackendError("list_namespaced_job: HTTP 429 (Retry-After: 3600)")


# the backend's shutdown -> outcomes recorded (range -> outcome), ranges left unrecorded
CASES = [
    ("removed outright: each recorded stopped", Removing, {KEYS[0]: "stopped", KEYS[1]: "stopped"}, []),
    (
        "one ended on its own before the stop keeps its verdict",
        Removing,
        {KEYS[0]: "stopped", KEYS[1]: "stopped", KEYS[2]: "ok"},
        [],
    ),
    ("one still running after the grace is left for a later run", Lingering, {KEYS[1]: "stopped"}, [KEYS[0]]),
    ("issue36: a backend that cannot answer the shutdown now leaves them to a later run", Throttled, {}, KEYS[:2]),
]


@pytest.mark.parametrize("why, backend_cls, recorded, left", CASES, ids=[c[0] for c in CASES])
def test_L37_every_attempt_in_flight_is_shut_down_and_recorded_once(tmp_path, why, backend_cls, recorded, left):
    clock = FakeClock()
    be = backend_cls(clock, lambda spec: Script(seconds=5 if spec.range_key == KEYS[2] else 100))
    records = RecordStore(Store(tmp_path / "root"), "m1")
    book = RangeBook(KEYS, records, "me", RetryPolicy(), 64 * GiB, lambda r, a: None)
    book.recover()
    f = Finisher("m1", be, records, book, clock, lambda *a: None, 60, 3, 50)
    n = 3 if KEYS[2] in recorded else 2
    for key in KEYS[:n]:
        be.submit(AttemptSpec("m1", key, 1, 6400, 6400, 8 * GiB, 8 * GiB, "small"))
        book.mine.add((key, 1))
    clock.sleep(10)  # the short one has ended, unrecorded
    count = stop_attempts("m1", "SIGTERM", 15.0, be, records, set(KEYS), f)
    got = {k: r.outcome for k in KEYS if (r := records.read_one(k, 1)) is not None and records.is_done(k, 1)}
    assert got == recorded and count == len(recorded)
    assert [k for k in KEYS[:n] if not records.is_done(k, 1)] == left
