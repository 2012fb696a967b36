"""What the dispatcher tells of each attempt's start (core/dispatch/live.py) alone: once when submitted,
once when first seen running with its node, never once a pass (issue 23)."""

from __future__ import annotations

import pytest

from catchup_assets.core.dispatch.live import AttemptEvents
from catchup_assets.core.dispatch.ports import AttemptSpec, AttemptState, Phase
from catchup_assets.core.units import GiB

KEY = "0000000001-0000006400"
SPEC = AttemptSpec("m1", KEY, 1, 6400, 6400, 6 * GiB, 8 * GiB, "small", capacity_type="spot")


def running(attempt=1, node="n1"):
    return AttemptState(KEY, attempt, Phase.RUNNING, started_at=100.0, node=node, tier="small")


# the passes' sightings -> the events told, as (attempt, phase, node)
CASES = [
    ("pending is not told", [[AttemptState(KEY, 1, Phase.PENDING)]], []),
    ("running is told with its node", [[running()]], [(1, "running", "n1")]),
    ("running for many passes is told once", [[running()], [running()], [running()]], [(1, "running", "n1")]),
    ("the next attempt is told too", [[running()], [running(2, "n2")]], [(1, "running", "n1"), (2, "running", "n2")]),
]


@pytest.mark.parametrize("why, passes, told", CASES, ids=[c[0] for c in CASES])
def test_L23_each_attempt_s_running_is_told_once(why, passes, told):
    events = []
    tell = AttemptEvents(events.append)
    for states in passes:
        for st in states:
            tell.seen(st)
    assert [(e.attempt, e.phase.value, e.node) for e in events] == told


def test_a_submit_is_told_pending_with_its_request_and_capacity():
    events = []
    AttemptEvents(events.append).submitted(SPEC)
    (e,) = events
    assert (e.phase, e.memory_request_bytes, e.memory_limit_bytes, e.capacity_type) == (
        Phase.PENDING,
        6 * GiB,
        8 * GiB,
        "spot",
    )
