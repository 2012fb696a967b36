"""The health watchdog (core/dispatch/health.py) alone, on a fake clock: overdue attempts, stragglers
(Z1), a stall told as it begins and ends (Z4), and the breaker's trip blocking dispatch once."""

from __future__ import annotations

import pytest

from catchup_assets.core.classify.outcomes import Outcome
from catchup_assets.core.dispatch.health import HEALTH_DISPATCH, HEALTH_STALL, FailingPasses, Watchdog
from catchup_assets.core.dispatch.ports import AttemptState, Phase
from catchup_assets.core.dispatch.results import DispatcherStuck
from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure
from catchup_assets.core.units import GiB
from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.core.values.ledger_range import LedgerRange
from fakes import FakeClock
from kit.dispatch import mission_config

A, B = LedgerRange(1, 6400), LedgerRange(6401, 12800)
T0 = 1_700_000_000.0


def dog(clock, profile=None, breaker_attempts=3):
    told = []
    mission = mission_config(stall_seconds=300, stall_factor=2.0, breaker_attempts=breaker_attempts)
    w = Watchdog(mission, {A.key: A, B.key: B}, profile, clock, lambda check, passed, why: told.append((check, passed)))
    return w, told


def running(rng, started):
    return AttemptState(rng.key, 1, Phase.RUNNING, started_at=started)


# attempts running (range, started s ago), profiled seconds of A -> overdue ratios (None: on time)
OVERRUN = [
    ("unprofiled, under stall_seconds: on time", None, 200, None),
    ("unprofiled, past stall_seconds: due at stall_seconds", None, 600, 2.0),
    ("profiled 400 s: due at 2 x 400", 400, 700, None),
    ("profiled 400 s, 1000 s running", 400, 1000, 1.25),
    ("a short profile is never due before stall_seconds", 10, 290, None),
]


@pytest.mark.parametrize("why, profiled, ran, ratio", OVERRUN, ids=[c[0] for c in OVERRUN])
def test_Z1_an_attempt_is_due_at_stall_factor_times_its_profile(why, profiled, ran, ratio):
    profile = ProfileIndex([RangeMeasure(A.last, GiB, seconds=profiled, first_ledger=A.first)]) if profiled else None
    w, _ = dog(FakeClock(T0), profile)
    assert w.overrun(running(A, T0 - ran), T0) == ratio


def test_Z4_a_stall_is_told_once_as_it_begins_and_once_as_it_ends():
    clock = FakeClock(T0)
    w, told = dog(clock)
    both = [running(A, T0), running(B, T0)]
    clock.sleep(200)
    assert w.watch(both, 2, 0, 10).stalled_seconds == 200 and told == []
    clock.sleep(400)  # both past stall_seconds, nothing completed for 600 s
    w.watch(both, 2, 0, 10)
    w.watch(both, 2, 0, 10)
    assert told == [(HEALTH_STALL, False)] and w.stalled
    w.completed()
    assert w.watch([running(A, clock.time())], 1, 0, 10).stalled_seconds == 0
    assert told == [(HEALTH_STALL, False), (HEALTH_STALL, True)] and not w.stalled


def test_Z1_stragglers_are_named_only_when_most_slots_idle_and_nothing_queues():
    clock = FakeClock(T0)
    w, _ = dog(clock)
    pair = [running(A, T0 - 50), running(B, T0 - 900)]
    assert w.watch(pair, 2, 1, 4).stragglers == ()  # something queued
    assert w.watch(pair, 2, 0, 3).stragglers == ()  # most slots busy
    names = w.watch(pair, 2, 0, 4).stragglers
    assert [n.split()[0] for n in names] == [B.key, A.key]  # the overdue one first


def test_the_breaker_s_trip_blocks_dispatch_once_with_its_cause():
    w, told = dog(FakeClock(T0), breaker_attempts=2)
    failed = AttemptRecord("m1", A.key, 1, outcome="failed", exit_code=1, reason="exit 1")
    first = w.finished(A.key, 1, Outcome.FAILED, failed)
    assert first.hold and not first.trip and w.blocked is None
    second = w.finished(
        B.key, 1, Outcome.FAILED, AttemptRecord("m1", B.key, 1, outcome="failed", exit_code=1, reason="exit 1")
    )
    assert second.trip and w.blocked == second.trip
    w.block("something else later")
    assert w.blocked == second.trip  # the first cause stands
    assert told == [(HEALTH_DISPATCH, False)]


BOOM, OTHER = RuntimeError("boom"), ValueError("other")

# the passes' failures in order (None: a pass that went through) -> the pass on which the dispatcher is stuck
FAILING = [
    ("the same failure three times in a row", [BOOM, BOOM, BOOM], 3),
    ("a pass that went through resets the count", [BOOM, BOOM, None, BOOM, BOOM], None),
    ("a different failure starts a new count", [BOOM, BOOM, OTHER, OTHER], None),
    ("the count is per failure, not per pass", [BOOM, OTHER, OTHER, OTHER], 4),
]


@pytest.mark.parametrize("why, passes, stuck_at", FAILING, ids=[c[0] for c in FAILING])
def test_a_failure_repeated_limit_passes_in_a_row_stops_the_dispatcher_after_its_snapshot(why, passes, stuck_at):
    snapshots = []
    failing = FailingPasses("m1", 3, lambda: snapshots.append(True))
    stuck = None
    for n, exc in enumerate(passes, 1):
        if exc is None:
            failing.ok()
            continue
        try:
            failing.failed(exc, n)
        except DispatcherStuck as e:
            stuck = n
            assert "the same failure on 3 consecutive passes" in str(e) and e.__cause__ is exc
    assert stuck == stuck_at and snapshots == ([True] if stuck_at else [])
