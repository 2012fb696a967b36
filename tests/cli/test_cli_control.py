"""`catchup-assets control`: it writes the mission's control record and prints the mission's state;
every bad input is refused naming the field, with nothing written."""

import json

import pytest

from catchup_assets.cli.main import run
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import save_mission
from catchup_assets.store import layout
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.root import Store
from catchup_assets.store.tables import write_table
from fakes import FakeBackend, FakeClock, Script

SPAN = MissionSpan(1, 64000, ledgers_per_range=6400)  # 10 ranges
CAP = 8  # the deployment's max_parallelism when m1 was planned, kept in its mission.json


def planned(root, mission="m1", finished=False):
    store = Store(root)
    cfg = MissionConfig(mission, SPAN, str(root), parallelism=2, poll_seconds=5)
    save_mission(store, cfg, max_parallelism=CAP)
    if finished:  # every range run to completion on the fake cluster
        clock = FakeClock()
        run_mission(prepare(cfg), FakeBackend(clock, lambda s: Script(seconds=5)), clock=clock)
    else:
        write_table(store, layout.plan(mission), prepare(cfg).plan)
    return store


def control(root, *args, mission="m1"):
    return run(["control", "--root", str(root), "--mission", mission, *args])


def test_pause_then_parallelism_then_resume_print_the_state(tmp_path, capsys):
    store = planned(tmp_path)
    assert control(tmp_path, "pause", "--who", "alice") == 0
    out = capsys.readouterr().out
    assert "mission m1: paused" in out and "parallelism: live 2, planned 2" in out
    assert "ranges: 10, done 0, condemned 0, in flight 0" in out and "pause (by cli:alice)" in out
    assert control(tmp_path, "parallelism", "4") == 0
    out = capsys.readouterr().out
    assert "mission m1: paused" in out and "parallelism: live 4, planned 2" in out
    assert control(tmp_path, "drain") == 0 and "mission m1: draining" in capsys.readouterr().out
    assert control(tmp_path, "resume") == 0 and "running as planned" in capsys.readouterr().out
    c = ControlStore(store, "m1").read()
    assert (c.paused, c.drain, c.parallelism) == (False, False, 4)
    assert [h.action for h in c.history] == ["pause", "parallelism", "drain", "resume"]


def test_issue36_a_record_edited_past_the_cap_does_not_block_a_pause(tmp_path, capsys):
    """The dispatchers run a hand-edited parallelism 100 at the cap; an operator's pause is not refused
    for the value the editor left: it starts from the cap, and the record is back within it."""
    store = planned(tmp_path)
    doc = {"paused": False, "parallelism": 100, "drain": False, "history": []}
    store.write_bytes(layout.control("m1"), json.dumps(doc).encode())
    assert control(tmp_path, "pause", "--who", "alice") == 0
    assert "parallelism: live 8, planned 2" in capsys.readouterr().out
    c = ControlStore(store, "m1").read()
    assert (c.paused, c.parallelism, [h.line() for h in c.history]) == (True, CAP, ["pause (by cli:alice)"])


@pytest.mark.parametrize("action", [["resume"], ["pause"], ["drain"], ["parallelism", "4"]])
def test_issue36_a_finished_mission_refuses_every_control_in_one_line(tmp_path, capsys, action):
    store = planned(tmp_path, finished=True)
    assert control(tmp_path, *action) == 2
    err = capsys.readouterr().err
    assert f"action: {action[0]} refused: the mission is finished" in err and "Traceback" not in err
    assert not store.exists(layout.control("m1"))  # nothing written


@pytest.mark.parametrize(
    "args, mission, named",
    [
        (["parallelism", "0"], "m1", "parallelism: must be >= 1"),
        (["parallelism", "-2"], "m1", "parallelism: must be >= 1"),
        # issue 36: the cap is the mission's record's, named with where it is set; the flag only lowers it
        (["parallelism", "9"], "m1", "parallelism: 9 is above the cap 8 (max_parallelism in "),
        (["parallelism", "100", "--max-parallelism", "2000"], "m1", "parallelism: 100 is above the cap 8 (max_p"),
        (["parallelism", "5", "--max-parallelism", "4"], "m1", "parallelism: 5 is above the cap 4 (--max-parallelism)"),
        (["pause", "--who", "a\nb"], "m1", "--who: 'a\\nb' holds a newline or control character"),
        (["pause", "--who", "a\x1b[2Jb"], "m1", "--who: 'a\\x1b[2Jb' holds a newline"),
        (["parallelism", "many"], "m1", "parallelism: 'many' is not an integer"),
        (["parallelism"], "m1", "value: parallelism needs a value"),
        (["pause", "3"], "m1", "value: pause takes no value"),
        (["pause"], "m2", "mission 'm2' has no plan"),
        (["pause"], "Bad_Name", "mission name 'Bad_Name' is invalid"),
    ],
)
def test_L34_bad_control_input_is_refused_naming_the_field_and_nothing_is_written(
    tmp_path, capsys, args, mission, named
):
    store = planned(tmp_path)
    before = sorted(store.find(""))
    assert control(tmp_path, *args, mission=mission) == 2
    err = capsys.readouterr().err
    assert named in err and "Traceback" not in err
    assert sorted(store.find("")) == before  # nothing written


def test_L34_a_root_that_is_not_there_is_refused_and_not_created(tmp_path, capsys):
    assert run(["control", "--root", str(tmp_path / "nowhere"), "--mission", "m1", "pause"]) == 2
    assert "--root:" in capsys.readouterr().err and not (tmp_path / "nowhere").exists()


def test_an_unknown_action_is_refused_by_the_parser(tmp_path, capsys):
    planned(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        control(tmp_path, "stop")
    assert exit_.value.code == 2 and "argument action" in capsys.readouterr().err
