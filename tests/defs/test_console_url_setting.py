"""The deployment's `console_url` (issue 46 item 2, links both ways): checked at load, naming the field.

The Dagster side of the links, on a real run (its `catchup/console` tag and the mission page's `console`
entry), is pinned by tests/cli/test_console_stop_dagster.py. Pinned here: failure 1 (no link leads from
Dagster to the mission's place) would be a silently wrong link if a bad URL loaded.
"""

import pytest

from catchup_assets.defs.resources import CatchupResource


@pytest.mark.parametrize(
    "url", ["console.example", "ftp://console.example", "https://a:b@console.example", "https://c.example/?x=<b>",
            "https://c.example:99999", "javascript:alert(1)"],
)  # fmt: skip
def test_issue46_a_bad_console_url_is_refused_at_load_naming_the_field(url):
    with pytest.raises(ValueError, match="console_url"):
        CatchupResource(console_url=url)


def test_issue46_the_console_url_names_each_mission_s_page_there():
    catchup = CatchupResource(console_url="https://console.example/catchup/")
    assert catchup.console_mission_url("m-7") == "https://console.example/catchup/missions/m-7"
    assert CatchupResource().console_mission_url("m-7") is None
