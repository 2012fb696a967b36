"""One scale (issue 22): what the Dagster UI shows of a demo mission is what the demo's summary prints.

The session's `demo` fixture (conftest.py) runs `catchup-assets demo` as a user does; the figures are
read back from the Dagster instance the UI opens (the materializations' metadata) and from the
summary the command printed, column by column for each mission.
"""

import dagster as dg
import pytest

from catchup_assets.defs.assets.range_assets import MISSION_TAG
from kit.demo import latest_metadata, printed


def number(cell: str) -> float:
    return float(cell.replace(",", ""))


def test_the_ui_dollars_node_hours_and_hours_equal_the_demo_summary(demo):
    d, missions, proc = demo
    cost = printed(proc.stdout, "cost (USD)")
    node_hours = printed(proc.stdout, "node-hours (est.)")
    hours = printed(proc.stdout, "compute hours")
    gib = printed(proc.stdout, "memory requested (GiB)")
    predicted = printed(proc.stdout, "  predicted (USD)")
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        for i, mission in enumerate(missions):
            ui = latest_metadata(instance, "range_profile", mission)
            # Dollars to the cent, as printed; node-hours, hours and GiB as printed, to the unit.
            assert f"{ui['actual_cost_usd']:,.2f}" == cost[i]
            assert ui["actual_node_hours"] == pytest.approx(number(node_hours[i]), abs=0.5)
            assert ui["actual_compute_hours"] == pytest.approx(number(hours[i]), abs=0.5)
            assert ui["actual_memory_requested_gib"] == pytest.approx(number(gib[i]), abs=0.5)
            assert number(cost[i]) > 1  # production dollars, not the demo's fractions of a cent
            assert "x 3,000,000" in ui["scale"] and "x0.005" in ui["scale"]
            plan = latest_metadata(instance, "mission_plan", mission)
            if predicted[i] == "-":  # the unprofiled mission predicts nothing
                assert "no previous profile" in plan["predicted_cost"]
            else:
                assert f"{plan['predicted_cost_usd']:,.2f}" == predicted[i]
                # Issue 36: the band rounded as the figure beside it, never "975 - 1.02e+03".
                p10, p90 = (number(x) for x in plan["makespan_p10_p90_hours"].split(" - "))
                assert p10 <= plan["expected_makespan_hours"] <= p90 and "e+" not in plan["makespan_p10_p90_hours"]
                assert f"{ui['predicted_cost_usd']:,.2f}" == predicted[i]


def test_a_range_partition_times_its_compute_as_the_core_times_tx_apply(demo):
    """`seconds` beside `tx_apply_seconds` on one scale: the compute that contains the apply is the longer."""
    d, missions, _ = demo
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        records = instance.fetch_materializations(dg.AssetKey("range_catchup"), limit=100).records
        runs = {r.run_id: r for r in instance.get_runs() if r.tags.get(MISSION_TAG) in missions}
        mine = [r for r in records if r.run_id in runs]
        assert mine
        for r in mine:
            meta = {k: v.value for k, v in r.asset_materialization.metadata.items()}
            assert meta["seconds"] >= meta["tx_apply_seconds"] > 0, meta
            assert "x 3,000,000" in meta["scale"]
            # Issue 36: the MiB beside production seconds say whose they are.
            assert "MiB: this deployment's, each standing for 200 MiB in production" in meta["scale"]


def table_cells(markdown: str) -> tuple[list[str], list[list[str]]]:
    """The header and rows of a Markdown table, as a GFM renderer (the UI's kind) splits its cells."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").enable("table").parse(markdown)
    rows, row, head = [], None, None
    for t in tokens:
        if t.type == "tr_open":
            row = []
        elif t.type == "inline" and row is not None:
            row.append(t.content)
        elif t.type == "tr_close":
            rows.append(row)
            row = None
        elif t.type == "thead_close":
            head = rows.pop()
    assert head is not None, markdown
    return head, rows


def test_the_tier_ladder_comparison_keeps_each_value_in_its_column(demo):
    d, missions, _ = demo
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        ui = latest_metadata(instance, "tier_ladder", missions[-1])
    head, rows = table_cells(ui["comparison"])
    assert head[:4] == ["ladder", "tiers", "ranges per tier", "cost_usd"]
    assert [r[0] for r in rows] == ["in use", "fitted"]
    for r in rows:
        cells = dict(zip(head, r, strict=True))  # as many cells as columns: nothing spilled over
        assert "GiB" in cells["tiers"] and "|" in cells["tiers"]  # the ladder's separator stays in its cell
        assert float(cells["cost_usd"].replace(",", "")) > 1  # production dollars: never rounded to 0
        assert float(cells["makespan_h"].replace(",", "")) > 0
    assert ui["fitted_cost_usd"] > 1 and "x 3,000,000" in ui["scale"]
