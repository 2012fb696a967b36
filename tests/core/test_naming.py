"""The next mission's name, from plain tables of cases (issue 21 item 4)."""

import pytest

from catchup_assets.core.errors import ConfigError
from catchup_assets.core.plan.config import validate_mission
from catchup_assets.core.plan.naming import next_mission_name

LONG = "a" * 36 + "-bcd"  # 40 characters: the longest name allowed


@pytest.mark.parametrize(
    ("previous", "taken", "expected"),
    [
        ("pubnet-2026-12", set(), "pubnet-2026-12-n2"),
        ("pubnet-2026-12-n2", set(), "pubnet-2026-12-n3"),
        ("pubnet-2026-12-n9", set(), "pubnet-2026-12-n10"),
        ("pubnet-2026-12", {"pubnet-2026-12-n2", "pubnet-2026-12-n3"}, "pubnet-2026-12-n4"),
        ("m1", set(), "m1-n2"),
        ("m-next-116", set(), "m-next-116-n2"),  # the old scheme's names chain on
        ("n2", set(), "n2-n2"),  # no base before the sequence: the whole name is the base
        ("x-n", set(), "x-n-n2"),
        (LONG, set(), "a" * 36 + "-n2"),  # cut to 40, no dash left dangling before the suffix
        ("a" * 36 + "-n99", set(), "a" * 35 + "-n100"),
    ],
)
def test_the_next_name_is_the_previous_with_a_sequence(previous, taken, expected):
    name = next_mission_name(previous, taken.__contains__)
    assert name == expected
    assert validate_mission(name) == name and name not in taken


def test_a_bad_previous_name_is_refused_naming_it():
    with pytest.raises(ConfigError, match="'Bad_Name'"):
        next_mission_name("Bad_Name")


def test_every_name_taken_is_refused_naming_the_field():
    with pytest.raises(ConfigError, match="^mission: no free name after 'm1'"):
        next_mission_name("m1", lambda _: True)
