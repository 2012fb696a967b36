"""The control reader (core/dispatch/obey.py) alone: a sequence of control records, as the operator
writes them, read once a pass; what it obeys, what it tells, and what the dispatching check says."""

from __future__ import annotations

import pytest

from catchup_assets.core.dispatch.health import HEALTH_DISPATCH, Watchdog
from catchup_assets.core.dispatch.mission_control import ABSOLUTE, MissionControl
from catchup_assets.core.dispatch.obey import ControlReader
from fakes import FakeClock
from kit.dispatch import mission_config

PLANNED = 8


def ctl(*actions):
    c = MissionControl()
    for i, (action, value) in enumerate(actions):
        c = c.apply(action, value, who="op", at=float(i), max_parallelism=100)
    return c


PAUSE, RESUME, DRAIN = ("pause", None), ("resume", None), ("drain", None)

# the records read pass by pass (an exception: unreadable) ->
#   (live cap, holding, state line) after the last, what on_control heard, what the dispatching check heard
CASES = [
    ("no record: run as planned", [None], (PLANNED, False, ""), [], []),
    (
        "a pause holds and warns the check",
        [ctl(PAUSE)],
        (PLANNED, True, "paused, parallelism 8"),
        ["pause"],
        [(False, "paused by an operator: pause (by op)")],
    ),
    (
        "the same record twice is told once",
        [ctl(PAUSE), ctl(PAUSE)],
        (PLANNED, True, "paused, parallelism 8"),
        ["pause"],
        [(False, "paused by an operator: pause (by op)")],
    ),
    (
        "pause then resume passes the check again",
        [ctl(PAUSE), ctl(PAUSE, RESUME)],
        (PLANNED, False, "running, parallelism 8"),
        ["pause", "resume"],
        [(False, "paused by an operator: pause (by op)"), (True, "resumed: resume (by op)")],
    ),
    (
        "a lowered cap",
        [ctl(("parallelism", 3))],
        (3, False, "running, parallelism 3 (planned 8)"),
        ["parallelism 3"],
        [],
    ),
    (
        "a drain holds without touching the check",
        [ctl(DRAIN)],
        (PLANNED, True, "draining, parallelism 8"),
        ["drain"],
        [],
    ),
    (
        "a torn record keeps the last good one, and the state line says why",
        [ctl(PAUSE), ValueError("torn"), OSError("gone")],
        (PLANNED, True, "paused, parallelism 8; control record unreadable (the last good one kept): gone"),
        ["pause"],
        [(False, "paused by an operator: pause (by op)")],
    ),
    (
        "a record read again clears the unreadable",
        [ctl(PAUSE), ValueError("torn"), ctl(PAUSE)],
        (PLANNED, True, "paused, parallelism 8"),
        ["pause"],
        [(False, "paused by an operator: pause (by op)")],
    ),
    (
        "unreadable before any good read: run as planned, and said",
        [ValueError("parallelism 10^12 is not an integer from 1 to 150000")],
        (
            PLANNED,
            False,
            "control record unreadable (running as planned): parallelism 10^12 is not an integer from 1 to 150000",
        ),
        [],
        [],
    ),
    (
        "a new reader tells only the last change",
        [ctl(PAUSE, RESUME, ("parallelism", 5))],
        (5, False, "running, parallelism 5 (planned 8)"),
        ["parallelism 5"],
        [],
    ),
]


@pytest.mark.parametrize("why, reads, after, controls, checks", CASES, ids=[c[0] for c in CASES])
def test_the_control_is_obeyed_and_told_once_per_change(why, reads, after, controls, checks):
    health, heard = [], []
    dog = Watchdog(mission_config(), {}, None, FakeClock(), lambda c, p, w: health.append((c, p, w)))
    pending = list(reads)

    def read():
        item = pending.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    reader = ControlReader("m1", PLANNED, ABSOLUTE, read, lambda c, what: heard.append(what), dog)
    for _ in reads:
        reader.read()
    assert (reader.live_cap(), reader.control.holding, reader.state()) == after
    assert [w.split(" (by")[0] for w in heard] == controls
    assert [(p, w) for c, p, w in health if c == HEALTH_DISPATCH] == checks


def test_a_resume_while_the_mission_blocked_itself_keeps_the_check_failing():
    health = []
    dog = Watchdog(mission_config(), {}, None, FakeClock(), lambda c, p, w: health.append((p, w)))
    records = iter([ctl(PAUSE), ctl(PAUSE, RESUME)])
    reader = ControlReader("m1", PLANNED, ABSOLUTE, lambda: next(records), lambda c, w: None, dog)
    reader.read()
    dog.block("circuit breaker: tripped")
    reader.read()
    assert health[-1] == (False, "circuit breaker: tripped")
