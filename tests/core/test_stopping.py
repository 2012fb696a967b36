"""The stop (core/dispatch/stopping.py) alone: the flag a signal handler sets, and the shutdown of the
attempts in flight, each recorded once, charged to no budget (L37)."""

from __future__ import annotations

import logging
import re
from collections import Counter

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
    assert got == recorded and count == sum(1 for o in recorded.values() if o == "stopped")
    assert [k for k in KEYS[:n] if not records.is_done(k, 1)] == left


# attempts that end on their own before the stop (of 4), those still running at it
LOG_CASES = [
    ("issue46: all 4 ended before the stop, none in flight", 4),
    ("2 ended, 2 still in flight", 2),
    ("none", 0),
]


@pytest.mark.parametrize("why, ended_first", LOG_CASES, ids=[c[0] for c in LOG_CASES])
def test_issue46_the_stop_s_log_lines_count_what_the_records_hold(tmp_path, caplog, why, ended_first):
    """Issue 46 failure 4 ("a stop's log says stopping 0 attempts in flight, then 1 attempts stopped and recorded,
    then 0 stopped, while the records hold 4 ok"): each figure the stop logs is the records' count of it."""
    clock = FakeClock()
    short = set(KEYS[:ended_first])
    be = Removing(clock, lambda spec: Script(seconds=5 if spec.range_key in short else 100))
    records = RecordStore(Store(tmp_path / "root"), "m1")
    book = RangeBook(KEYS[:4], records, "me", RetryPolicy(), 64 * GiB, lambda r, a: None)
    book.recover()
    f = Finisher("m1", be, records, book, clock, lambda *a: None, 60, 3, 50)
    for key in KEYS[:4]:
        be.submit(AttemptSpec("m1", key, 1, 6400, 6400, 8 * GiB, 8 * GiB, "small"))
        book.mine.add((key, 1))
    clock.sleep(10)  # the short ones have ended, unrecorded
    with caplog.at_level(logging.WARNING, logger="catchup_assets.core.dispatch.stopping"):
        count = stop_attempts("m1", "SIGTERM", 15.0, be, records, set(KEYS), f)
    held = Counter(r.outcome for k in KEYS[:4] if (r := records.read_one(k, 1)) is not None)
    first, last = [r.getMessage() for r in caplog.records]
    assert int(re.search(r"stopping (\d+) attempts in flight", first)[1]) == held["stopped"] == 4 - ended_first
    assert int(re.search(r"(\d+) attempts stopped, recorded `stopped`", last)[1]) == held["stopped"] == count
    said_ok = re.search(r"(\d+) ended on their own first, recorded (\d+) ok", last)
    assert (int(said_ok[1]), int(said_ok[2])) == (held["ok"], held["ok"]) if ended_first else said_ok is None
    assert held["ok"] == ended_first
    assert (f"; {ended_first} more ended on their own" in first) == bool(ended_first)
