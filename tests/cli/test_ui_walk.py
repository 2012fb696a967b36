"""A headless Chromium walk of the Dagster UI over a demo instance with a condemned range.

The demo runs its two missions with one range whose simulated history archive is corrupt
(`--fail-ranges 1`: stellar-core fails on it every time), so both missions condemn it and
record their evidence on its partition. Then `dagster dev` serves that instance on a free
loopback port, as the "Dagster UI" command of docs/tutorial.md does, and Debian's `chromium`
walks it (tests/kit/ui.py): the asset graph, the range partitions with the failed one, the
failed partition's evidence with its log tail, the profile's and the tier map's plots,
`mission_plan`'s launchpad filled in for the next mission, and last the failure walk of
docs/tutorial.md: the archive repaired, the location reloaded, the failed range backfilled
with the buttons the UI has, and green. Each view is checked for what it shows, then saved
under `docs/ui/` (the screenshots docs/tutorial.md points at): `uv run pytest -m browser`
regenerates them. `dagster dev`'s log holds no traceback at the end (issue 36 item 5).
"""

import io
import re
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest

from catchup_assets.cli.demo.archive import repair
from catchup_assets.cli.demo.run import run_demo
from catchup_assets.cli.demo.settings import DemoSettings
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.defs.mission.range_events import planned_as_subset
from kit.ui import CHROMIUM, metadata_row, shot, tracebacks, until

pytestmark = pytest.mark.browser

if CHROMIUM is None:
    pytest.skip("no chromium on PATH (Debian: apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright not installed (dev group: uv sync)")
expect = sync_api.expect

RANGES = 6
RANGE = dg.AssetKey("range_catchup")


@dataclass(frozen=True)
class Demo:
    directory: Path
    span: MissionSpan
    missions: list[str]  # oldest first
    key: str  # the condemned range's partition
    evidence: dict  # its newest observation's metadata values
    run_id: str  # the run that recorded it


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Demo:
    directory = tmp_path_factory.mktemp("ui") / "demo"
    settings = DemoSettings(
        directory, ranges=RANGES, parallelism=RANGES, speed=10_000_000, disruption_rate=0, fail_ranges=1
    )
    assert run_demo(settings, out=io.StringIO()) == 1  # a condemned range: the demo says so
    missions = sorted(p.name for p in (directory / "storage").iterdir() if p.is_dir())
    assert len(missions) == 2, missions
    (key,) = [r.key for r in settings.failing()]
    with dg.DagsterInstance.from_config(str(settings.home)) as instance:
        records = instance.fetch_observations(
            dg.AssetRecordsFilter(asset_key=RANGE, asset_partitions=[key]), limit=100
        ).records
        # Issue 26: the demo plans each run as one subset, as the chart does; the walk below sees
        # the FAILED partition that the run's own planned row gives it.
        assert all(planned_as_subset(instance, r.run_id, RANGE) for r in records)
    records = [r for r in records if r.asset_observation.metadata["kind"].value == "condemned"]  # not the starts
    assert len(records) == 2, records  # one observation per mission that gave the range up
    latest = records[0]  # newest first: the second mission's
    evidence = {k: v.value for k, v in latest.asset_observation.metadata.items()}
    assert evidence["mission"] == missions[-1]
    return Demo(directory, settings.span(), missions, key, evidence, latest.run_id)


def show_markdown(page, key: str):
    """Open a Markdown metadata value (the UI puts one over 1000 characters behind a link); its dialog."""
    metadata_row(page, key).get_by_text("[Show Markdown]").click()
    dialog = page.get_by_role("dialog").filter(has_text=key)
    expect(dialog).to_be_visible()
    return dialog


def assert_png_shown(dialog) -> None:
    img = dialog.locator("img")
    expect(img).to_have_count(1)
    assert img.get_attribute("src").startswith("data:image/png;base64,")
    img.scroll_into_view_if_needed()
    # Decoded and laid out, not a broken-image icon.
    assert img.evaluate("i => i.complete && i.naturalWidth > 100 && i.getBoundingClientRect().width > 100")


def test_asset_graph_shows_the_range_asset_partly_failed(page):
    page.goto("/asset-groups")
    graph = page.locator("svg").filter(has_text="tier_map").first
    for name in ("mission_plan", "range_catchup", "range_profile", "tier_map"):
        expect(graph.get_by_text(name, exact=True)).to_be_visible()
    # Fitted to the page, the nodes show names only: hide the asset list, zoom in on the graph
    # and centre it, so each node shows its partitions and checks.
    page.get_by_role("button", name="panel_show_right", exact=True).click()
    expect(page.get_by_role("combobox", name="Jump to")).to_be_hidden()
    box = graph.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.keyboard.down("Control")
    page.mouse.wheel(0, -200)
    page.keyboard.up("Control")
    expect(graph.get_by_text(re.compile(r"filled \(1 failed\)"))).to_be_visible()  # range_catchup's partitions
    viewport = graph.locator("xpath=../..").bounding_box()
    box = graph.bounding_box()
    x, y = viewport["x"] + 40, viewport["y"] + 120  # empty canvas, below the toolbar
    dx = viewport["x"] + viewport["width"] / 2 - (box["x"] + box["width"] / 2)
    dy = viewport["y"] + viewport["height"] / 2 - (box["y"] + box["height"] / 2)
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(x + dx, y + dy, steps=10)
    page.mouse.up()
    for name in ("mission_plan", "tier_map"):
        expect(graph.get_by_text(name, exact=True)).to_be_in_viewport(ratio=1)
    shot(page, "01-asset-graph.png")


def test_partitions_view_shows_the_condemned_range_failed(page, demo):
    page.goto("/assets/range_catchup?view=partitions")
    expect(page.get_by_text("Failed (1)")).to_be_visible()
    expect(page.get_by_text(f"Materialized ({RANGES - 1})")).to_be_visible()
    page.get_by_text(demo.key, exact=True).first.click()
    expect(page).to_have_url(re.compile(rf"view=partitions&partition={demo.key}$"))
    expect(page.get_by_text("failed, and did not materialize this asset")).to_contain_text(demo.run_id[:8])
    shot(page, "02-range-catchup-partitions.png")


def test_failed_partition_shows_its_cause_and_last_error_in_place(page, demo):
    """Issue 22 item 3: the condemned range's evidence reads on its own pane, no dialog opened.

    Dagster 1.13's Partitions pane shows the metadata of a partition's latest materialization
    only (and observations after it), so a range never completed shows none there (the test
    above); its evidence is its latest event, the pane the Events tab opens for that partition."""
    ev = demo.evidence
    page.goto(f"/assets/range_catchup?view=events&partition={demo.key}")
    expect(page.get_by_text("observed in run")).to_have_text(f"Partition {demo.key} observed in run {demo.run_id[:8]}")
    for key in ("cause", "outcomes", "last_error", "mission"):
        expect(metadata_row(page, key)).to_contain_text(ev[key])
    assert '[default FATAL] Got an exception: Invariant "ConservationOfLumens"' in ev["last_error"]
    assert ev["last_error"] in ev["cause"]  # the cause names stellar-core's own error
    tail = metadata_row(page, "log_tail")
    expect(tail).to_contain_text("Last lines of the last attempt's log, metric report left out:")
    expect(tail).to_contain_text(ev["last_error"])  # whole, last
    expect(tail).not_to_contain_text("metric 'ledger.transaction.apply'")
    expect(tail).not_to_contain_text("calls/ms")
    expect(page.get_by_text("[Show Markdown]")).to_have_count(0)
    expect(page.get_by_role("dialog")).to_have_count(0)
    # In place means on screen: the evidence wraps inside the pane, no line runs past its edge.
    table = page.get_by_role("table").filter(has=page.get_by_role("cell", name="log_tail", exact=True))
    assert table.evaluate("t => t.getBoundingClientRect().right <= window.innerWidth && t.scrollWidth <= t.clientWidth")
    # And on one screen: the cause and the tail down to its last line.
    tail.evaluate("e => e.scrollIntoView({block: 'end'})")
    for key in ("cause", "last_error", "log_tail"):
        expect(metadata_row(page, key)).to_be_in_viewport(ratio=1)
    shot(page, "03-failed-partition-evidence.png")


def test_range_profile_shows_its_table_and_plot(page, demo):
    page.goto("/assets/range_profile")
    expect(metadata_row(page, "mission")).to_contain_text(demo.missions[-1])
    expect(metadata_row(page, "unmeasured_ranges")).to_contain_text("1")  # the condemned range
    # The one plot the UI shows inline: a line of block characters, not a [Show Markdown] link.
    expect(metadata_row(page, "memory_by_ledger")).to_contain_text("█")
    expect(metadata_row(page, "memory_by_ledger")).to_contain_text("tallest")
    expect(metadata_row(page, "preview")).to_contain_text("peak_anon_mib")
    page.get_by_role("button", name="Metadata").evaluate("e => e.scrollIntoView({block: 'start'})")
    shot(page, "05-range-profile-metadata.png")

    dialog = show_markdown(page, "plot")
    assert_png_shown(dialog)
    shot(page, "06-range-profile-plot.png")
    dialog.get_by_role("button", name="Close").click()


def test_tier_map_shows_its_plot(page, demo):
    page.goto("/assets/tier_map")
    expect(metadata_row(page, "mission")).to_contain_text(demo.missions[-1])
    dialog = show_markdown(page, "plot")
    assert_png_shown(dialog)
    shot(page, "07-tier-map-plot.png")
    dialog.get_by_role("button", name="Close").click()


def test_mission_plan_launchpad_takes_the_next_mission(page, demo):
    page.goto("/assets/mission_plan")
    page.get_by_role("button", name="Materialize").first.click(modifiers=["Shift"])  # the launchpad
    dialog = page.get_by_role("dialog").filter(has_text="Launchpad")
    span = demo.span
    # Issue 14 item 4: the scaffold is the demo's grid and parallelism, not production's 16000/320 and 1000.
    editor = dialog.locator(".CodeMirror")
    expect(editor).to_contain_text(f"ledgers_per_range: {span.ledgers_per_range}")
    expect(editor).to_contain_text(f"last_ledger: {span.last_ledger}")
    expect(editor).to_contain_text(f"parallelism: {RANGES}")
    profile = demo.directory / "storage" / demo.missions[-1] / "range_profile.parquet"
    config = f"""ops:
  mission_plan:
    config:
      mission: ui-next
      first_ledger: {span.first_ledger}
      last_ledger: {span.last_ledger}
      ledgers_per_range: {span.ledgers_per_range}
      overlap: {span.overlap}
      order: longest-first
      parallelism: {RANGES}
      previous_profile: {profile}
      deadline_seconds: null
"""
    dialog.locator(".CodeMirror").click()  # the config editor
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(config)
    expect(dialog.get_by_text("No errors")).to_be_visible()
    expect(dialog.get_by_role("button", name="Materialize")).to_be_enabled()  # not pressed: nothing runs
    shot(page, "08-mission-plan-launchpad.png")


def test_the_launchpad_refuses_a_resource_override_before_launch(page, demo):
    """Issue 22 item 1: the deployment's settings are on the Resources page and not in the launch form:
    the launchpad flags a launch that raises the deployment's cap, before Launch."""
    page.goto("/locations/catchup_assets/resources/catchup")
    body = page.locator("body")
    expect(body).to_contain_text("fixed when the code location loads")
    expect(body).to_contain_text(f"storage root: {demo.directory / 'storage'}")
    expect(body).to_contain_text(f"at most {RANGES} (mission_defaults.max_parallelism)")
    shot(page, "resources-catchup.png")
    page.goto("/assets/mission_plan")
    page.get_by_role("button", name="Materialize").first.click(modifiers=["Shift"])  # the launchpad
    dialog = page.get_by_role("dialog").filter(has_text="Launchpad")
    config = """ops:
  mission_plan:
    config:
      mission: ui-over
      parallelism: 4000
resources:
  catchup:
    config:
      mission_defaults:
        max_parallelism: 5000
"""
    dialog.locator(".CodeMirror").click()  # the config editor
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(config)
    expect(dialog.get_by_text(re.compile(r'unexpected config entry "mission_defaults"', re.I)).first).to_be_visible()
    expect(dialog.get_by_text("No errors")).to_have_count(0)
    expect(dialog.get_by_role("button", name="Materialize")).to_be_disabled()
    shot(page, "launchpad-refused.png")


def test_issue36_the_failure_walk_backfills_the_repaired_range_with_the_buttons_the_ui_has(page, demo):
    """Issue 36 item 11: docs/tutorial.md's failure walk, click by click, as it names the buttons."""
    assert repair(demo.directory, out=io.StringIO()) == 0  # `catchup-assets demo --repair`
    page.goto("/deployment/locations")
    page.get_by_role("button", name="Reload all").click()  # Deployment > "Reload all"
    page.goto("/assets/range_catchup?view=partitions")  # Catalog > range_catchup > Partitions
    expect(page.get_by_text("Failed (1)")).to_be_visible()
    page.get_by_role("button", name="Materialize…").click()  # "Materialize…"
    dialog = page.get_by_role("dialog").filter(has_text="Launch runs to materialize range_catchup")
    dialog.get_by_role("button", name="Failed", exact=True).click()  # Partition selection: "Failed"
    expect(dialog.get_by_text("1 partition", exact=True)).to_be_visible()
    expect(dialog).to_contain_text(demo.key)  # shown middle-truncated
    shot(page, "09-failure-walk-backfill.png")
    dialog.get_by_role("button", name="Launch 1 run").click()  # one range: "Launch 1 run"
    expect(page.get_by_text(re.compile(r"^Launched run"))).to_be_visible()

    # The daemon starts the queued run; the repaired archive lets stellar-core through.
    def green() -> bool:
        page.reload()
        page.get_by_text(f"Materialized ({RANGES})").wait_for(timeout=10_000)
        return True

    assert until(green, 180), "the backfilled range never went green"
    expect(page.get_by_text("Failed (0)")).to_be_visible()
    shot(page, "10-failure-walk-green.png")


def test_issue36_dagster_dev_logged_no_traceback_in_the_walk(ui, demo):
    """Issue 36 item 5: the walk's `dagster dev` (webserver, daemon, runs) printed no traceback."""
    assert tracebacks(demo.directory / "dagster_dev.log") == []
