"""The operator's control record as a pure value: its rules, as a table of cases."""

import pytest

from catchup_assets.core.dispatch.mission_control import HISTORY_LIMIT, Change, MissionControl
from catchup_assets.core.errors import ConfigError, StateError

CAP = 8
RUNNING = MissionControl()
PAUSED = MissionControl(paused=True)
DRAINING = MissionControl(drain=True)


@pytest.mark.parametrize(
    "start, action, value, finished, paused, drain, parallelism",
    [
        (RUNNING, "pause", None, False, True, False, None),
        (PAUSED, "pause", None, False, True, False, None),  # idempotent
        (PAUSED, "resume", None, False, False, False, None),
        (DRAINING, "resume", None, False, False, False, None),  # a drained run's rest is let go again
        (RUNNING, "drain", None, False, False, True, None),
        (PAUSED, "drain", None, False, True, True, None),
        (RUNNING, "parallelism", 4, False, False, False, 4),
        (RUNNING, "parallelism", CAP, False, False, False, CAP),  # the cap itself is allowed
        (RUNNING, "parallelism", 1, False, False, False, 1),
        (PAUSED, "parallelism", 3, False, True, False, 3),  # set while paused, used on resume
    ],
)
def test_transitions(start, action, value, finished, paused, drain, parallelism):
    after = start.apply(action, value, who="ops", at=10.0, max_parallelism=CAP, finished=finished)
    assert (after.paused, after.drain, after.parallelism) == (paused, drain, parallelism)
    assert after.history[-1] == Change(10.0, "ops", action, value)


@pytest.mark.parametrize(
    "start, action, value, finished, field",
    [
        (RUNNING, "parallelism", 0, False, "parallelism"),
        (RUNNING, "parallelism", -3, False, "parallelism"),
        (RUNNING, "parallelism", CAP + 1, False, "parallelism"),
        (RUNNING, "parallelism", True, False, "parallelism"),
        (RUNNING, "parallelism", "4", False, "parallelism"),
        (RUNNING, "parallelism", None, False, "value"),
        (RUNNING, "pause", 3, False, "value"),
        (RUNNING, "stop", None, False, "action"),
        (PAUSED, "resume", None, True, "action"),  # nothing left to dispatch
        (DRAINING, "resume", None, True, "action"),
        (RUNNING, "pause", None, True, "action"),  # issue 36: a finished mission takes no control at all
        (RUNNING, "drain", None, True, "action"),
        (RUNNING, "parallelism", 4, True, "action"),
    ],
)
def test_refusals_name_the_field(start, action, value, finished, field):
    with pytest.raises(ConfigError, match=rf"^{field}:"):
        start.apply(action, value, who="ops", at=1.0, max_parallelism=CAP, finished=finished)


def test_the_history_is_bounded_newest_kept():
    c = RUNNING
    for i in range(HISTORY_LIMIT + 5):
        c = c.apply("parallelism", 1 + i % CAP, who=f"op{i}", at=float(i), max_parallelism=CAP)
    assert len(c.history) == HISTORY_LIMIT and c.history[-1].who == f"op{HISTORY_LIMIT + 4}"
    assert c.history[0].who == "op5"


@pytest.mark.parametrize(
    "control, planned, live, line",
    [
        (RUNNING, 2, 2, "running, parallelism 2"),
        (MissionControl(parallelism=4), 2, 4, "running, parallelism 4 (planned 2)"),
        (MissionControl(paused=True, parallelism=1), 2, 1, "paused, parallelism 1 (planned 2)"),
        (MissionControl(paused=True, drain=True), 2, 2, "draining, parallelism 2"),
    ],
)
def test_live_parallelism_and_state(control, planned, live, line):
    assert control.live_parallelism(planned) == live and control.state(planned) == line


def test_since_names_only_the_changes_after_what_was_seen():
    a = RUNNING.apply("pause", None, who="x", at=1, max_parallelism=CAP)
    b = a.apply("parallelism", 3, who="y", at=2, max_parallelism=CAP).apply(
        "resume", None, who="z", at=3, max_parallelism=CAP
    )
    assert [c.who for c in b.since(a)] == ["y", "z"]
    assert [c.who for c in b.since(None)] == ["x", "y", "z"]
    assert b.since(b) == []


def test_round_trip_and_bad_shapes():
    c = RUNNING.apply("parallelism", 3, who="x", at=1.5, max_parallelism=CAP).apply(
        "pause", None, who="y", at=2, max_parallelism=CAP
    )
    assert MissionControl.from_doc(c.to_doc()) == c
    for doc in [
        None,
        [],
        {"paused": "yes", "drain": False, "parallelism": None, "history": []},
        {"paused": False, "drain": False, "parallelism": 0, "history": []},
        {"paused": False, "drain": False, "parallelism": None},
        {"paused": False, "drain": False, "parallelism": None, "history": [{"at": 1, "who": "x", "action": "kill"}]},
    ]:
        with pytest.raises(StateError):
            MissionControl.from_doc(doc)
