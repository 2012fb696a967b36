"""A headless Chromium walk of a mission launched from the Dagster UI, while it runs, drained and stopped (issue 36).

A demo's two missions run first (their profile times the next one). Then `dagster dev` serves the demo's
instance (tests/kit/ui.py), and the walk does what an operator does: it launches mission `ui-live` from
`mission_plan`'s launchpad; `mission_plan_sensor` starts its range_catchup run; the operator pauses it
with `catchup-assets control`, opens the run and, one click from it, the mission's page (range_profile's
partition of the mission): this mission's counts and time to go, while range_catchup's partitions view
counts every mission's greens. Then a drain ends the run Canceled, not a green Success, and the page says
drained and how many ranges never started. Last, mission `ui-stop` is launched the same way and terminated
from its run's page: the run ends Canceled (Dagster's local run launcher sends its worker SIGTERM: the
operator's stop, L37), none of its ranges is Failed, and its page says stopped, with how many ranges were
stopped and never started.

The sim runs slower here than in the demo (`sim_speed` in the demo's catchup.json, which the code location
reads), so a range takes seconds, and at parallelism 1 the mission is still running when the walk looks.
Each view is saved under `docs/ui/`; `uv run pytest -m browser` regenerates them.
"""

import io
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from catchup_assets.cli.demo.run import run_demo
from catchup_assets.cli.demo.settings import DemoSettings
from kit.ui import CHROMIUM, TIMEOUT_MS, metadata_row, shot, tracebacks, until

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    pytest.skip("no chromium on PATH (Debian: apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (dev group: uv sync)")
expect = sync_api.expect

RANGES = 6
PROFILE = dg.AssetKey("range_profile")
CLI = Path(sys.executable).parent / "catchup-assets"


@dataclass(frozen=True)
class Demo:
    directory: Path
    settings: DemoSettings

    @property
    def storage(self) -> str:
        return self.settings.storage_root

    def instance(self) -> dg.DagsterInstance:
        return dg.DagsterInstance.from_config(str(self.settings.home))


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Demo:
    directory = tmp_path_factory.mktemp("ui-mission") / "demo"
    settings = DemoSettings(directory, ranges=RANGES, parallelism=RANGES, speed=10_000_000, disruption_rate=0)
    assert run_demo(settings, out=io.StringIO()) == 0
    # The missions the UI launches run slower, with a status (and so the mission's page) every second.
    path = directory / "catchup.json"
    values = json.loads(path.read_text())
    path.write_text(json.dumps({**values, "sim_speed": 300_000, "status_every": 4}))
    return Demo(directory, settings)


def launch(page, mission: str) -> None:
    """`mission_plan`'s launchpad, as an operator fills it: the next mission from the latest profile, one at a time."""
    page.goto("/assets/mission_plan")
    page.get_by_role("button", name="Materialize").first.click(modifiers=["Shift"])  # the launchpad
    dialog = page.get_by_role("dialog").filter(has_text="Launchpad")
    config = f"""ops:
  mission_plan:
    config:
      mission: {mission}
      parallelism: 1
      lengths: uniform
      order: longest-first
      previous_profile: latest
"""
    dialog.locator(".CodeMirror").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(config)
    expect(dialog.get_by_text("No errors")).to_be_visible()
    dialog.get_by_role("button", name="Materialize").click()
    expect(dialog).to_be_hidden()  # launched: the run queues, and the daemon starts it


def page_entries(demo: Demo, mission: str) -> list[tuple[str, dict]]:
    """The mission page's observations, newest first: (run id, metadata values)."""
    with demo.instance() as instance:
        one = dg.AssetRecordsFilter(asset_key=PROFILE, asset_partitions=[mission])
        records = instance.fetch_observations(one, limit=20).records
        return [(r.run_id, {k: v.value for k, v in r.asset_observation.metadata.items()}) for r in records]


def wait_for_page(demo: Demo, mission: str, predicate, seconds: float = 240) -> tuple[str, dict]:
    """The newest entry of the mission's page once `predicate` holds for it (the run, the sensor, the daemon)."""
    seen: list[tuple[str, dict]] = []

    def newest() -> bool:
        seen[:] = page_entries(demo, mission)[:1]
        return bool(seen) and predicate(seen[0][1])

    assert until(newest, seconds), f"{mission}'s page: {seen}\n{tracebacks(demo.directory / 'dagster_dev.log')}"
    return seen[0]


def control(demo: Demo, mission: str, action: str) -> None:
    done = subprocess.run(
        [str(CLI), "control", "--root", demo.storage, "--mission", mission, "--who", "ui-walk", action],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def open_mission_page_from_the_run(page, run_id: str, mission: str):
    """The run's page, then its log's `mission_page` link: one click (the UI opens it in a new tab); that tab."""
    page.goto(f"/runs/{run_id}")
    page.get_by_placeholder("Filter…").fill("type:ASSET_OBSERVATION")
    link = page.get_by_role("link", name=re.compile(rf"partition={mission}$")).last
    with page.context.expect_page() as opened:
        link.click()
    tab = opened.value
    tab.set_default_timeout(TIMEOUT_MS)
    expect(tab).to_have_url(re.compile(rf"/assets/range_profile\?view=events&partition={mission}$"))
    return tab


def test_issue36_a_running_missions_page_shows_its_counts_and_time_to_go_one_click_from_its_run(page, demo):
    launch(page, "ui-live")
    wait_for_page(demo, "ui-live", lambda m: m["state"] == "running")  # its first status
    control(demo, "ui-live", "pause")
    run_id, paused = wait_for_page(demo, "ui-live", lambda m: m["state"] == "paused")
    # The in-flight range finishes while paused; nothing new starts.
    _, paused_done = wait_for_page(
        demo, "ui-live", lambda m: m["state"] == "paused" and m["running"] + m["pending"] == 0
    )
    tab = open_mission_page_from_the_run(page, run_id, "ui-live")
    expect(metadata_row(tab, "state")).to_contain_text("paused")
    expect(metadata_row(tab, "progress")).to_contain_text(f"{paused_done['done']} of {RANGES} done")
    expect(metadata_row(tab, "time_to_go")).to_contain_text(re.compile(r"to go \(p10 .*, p90 .*\)"))
    for key in ("done", "running", "pending", "queued", "condemned", "time_to_go_seconds"):
        expect(metadata_row(tab, key)).to_be_visible()
    shot(tab, "11-mission-page-running.png")
    tab.close()
    # The partitions view counts every mission's greens (the demo's two): the page counts this one's.
    page.goto("/assets/range_catchup?view=partitions")
    expect(page.get_by_text(f"Materialized ({RANGES})")).to_be_visible()


def test_issue36_a_drained_mission_is_not_green_and_its_page_counts_what_never_started(page, demo):
    control(demo, "ui-live", "drain")
    run_id, ended = wait_for_page(demo, "ui-live", lambda m: m["state"].startswith("ended"))
    assert ended["state"] == "ended: drained"
    assert 0 < ended["not_started"] == ended["left"] == RANGES - ended["done"]
    tab = open_mission_page_from_the_run(page, run_id, "ui-live")
    expect(metadata_row(tab, "state")).to_contain_text("ended: drained")
    expect(metadata_row(tab, "why")).to_contain_text(f"{ended['not_started']} not started")
    shot(tab, "12-mission-page-drained.png")
    tab.close()
    # The run's mission_complete check says so beside it: a warning, not a pass.
    page.goto("/assets/range_catchup?view=checks&checkDetail=mission_complete")
    body = page.locator("body")
    expect(body).to_contain_text(re.compile(r"Evaluation result\s*(Warning|Failed)"))
    expect(body).to_contain_text(ended["why"])
    shot(page, "12b-mission-complete-drained.png")
    # And the run is not a green Success: Canceled, as a stop (no range failed).
    with demo.instance() as instance:
        assert until(lambda: instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.CANCELED, 60)
    page.goto(f"/runs/{run_id}")
    expect(page.get_by_text("Canceled", exact=True).first).to_be_visible()  # the run's status, at its top
    expect(page.get_by_text("Success", exact=True)).to_have_count(0)


def test_issue36_L37_a_mission_terminated_from_its_run_page_is_canceled_and_none_of_its_ranges_failed(page, demo):
    launch(page, "ui-stop")
    run_id, _ = wait_for_page(demo, "ui-stop", lambda m: m["state"] == "running")
    control(demo, "ui-stop", "pause")  # it stays live while the walk reaches its page
    page.goto(f"/runs/{run_id}")
    page.get_by_role("button", name="Terminate").first.click()
    page.get_by_role("dialog").get_by_role("button", name=re.compile("^Terminate")).click()
    # Dagster's local run launcher terminates a run with SIGTERM to its worker: the operator's stop (L37).
    _, ended = wait_for_page(demo, "ui-stop", lambda m: m["state"].startswith("ended"))
    assert ended["state"] == "ended: stopped" and ended["condemned"] == 0
    with demo.instance() as instance:
        assert until(lambda: instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.CANCELED, 120)
    page.goto("/assets/range_catchup?view=partitions")
    expect(page.get_by_text("Failed (0)")).to_be_visible()
    tab = open_mission_page_from_the_run(page, run_id, "ui-stop")
    expect(metadata_row(tab, "state")).to_contain_text("ended: stopped")
    expect(metadata_row(tab, "why")).to_contain_text(f"{ended['stopped']} stopped")
    shot(tab, "13-mission-page-stopped.png")
    tab.close()


def test_issue36_dagster_dev_logged_no_traceback_in_the_mission_walk(ui, demo):
    assert tracebacks(demo.directory / "dagster_dev.log") == []
