"""The KPIs of sizing (issue 23) of the demo's two missions: what range_profile's metadata shows and what
the demo's summary prints equal pandas computations, written here, over the missions' attempt records.

The session's `demo` fixture (conftest.py) runs `catchup-assets demo`; the records are read back with
RecordStore, the metadata from the Dagster instance the UI opens, the prices from the demo's own
resource (the catalog and tiers it ran with). Definitions: docs/cost.md, "The KPIs of sizing".
"""

import dagster as dg
import pandas as pd
import pytest

from catchup_assets.defs.location import load_location
from catchup_assets.defs.resources import deployment_catchup
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.demo import latest_metadata, printed

GiB = 1024**3


def attempts(storage: str, mission: str) -> pd.DataFrame:
    records, done = RecordStore(Store(storage), mission).load()
    df = pd.DataFrame([vars(r) for ident, r in records.items() if ident in done])
    return df[df["outcome"].notna()]


def pandas_kpis(df: pd.DataFrame, placement) -> dict:
    ok = df[(df["outcome"] == "ok") & df["peak_anon_bytes"].notna() & (df["memory_limit_bytes"] > 0)]
    per_range = ok.groupby("range_key")[["peak_anon_bytes", "memory_limit_bytes"]].sum()
    per_tier = ok.groupby("tier")[["peak_anon_bytes", "memory_limit_bytes"]].sum()
    first = df[df["outcome"] != "stopped"].sort_values("attempt").groupby("range_key")["outcome"].first()

    # Dollars spent, every finished attempt: the share of its tier's node it requested x price x hours.
    tiers = {t.name: t for t in placement.tiers.all()}
    shapes = pd.DataFrame([vars(s) for s in placement.catalog.shapes])

    def capacity(row) -> str:
        return row["capacity_type"] if isinstance(row["capacity_type"], str) else tiers[row["tier"]].capacity_type

    def hourly(shape, cap: str) -> float:
        return shape["spot_hourly"] if cap == "spot" else shape["on_demand_hourly"]

    def spent(row) -> float:
        tier = tiers[row["tier"]]
        shape = shapes.set_index("name").loc[placement.shape_of(row["tier"]).name]
        cpu = placement.sizing.cpu_request if placement.sizing.cpu_request is not None else tier.cpu
        share = (
            1 / tier.pods_per_node
            if tier.pods_per_node
            else min(
                1.0,
                max(row["memory_request_bytes"] / shape["allocatable_memory_bytes"], cpu / shape["allocatable_cpu"]),
            )
        )
        return share * hourly(shape, capacity(row)) * row["seconds"] / 3600

    def ideal(row) -> float:
        fits = shapes[shapes["allocatable_memory_bytes"] >= row["peak_anon_bytes"]]
        rate = min(hourly(s, capacity(row)) / (s["allocatable_memory_bytes"] / GiB) for _, s in fits.iterrows())
        return row["peak_anon_bytes"] / GiB * row["seconds"] / 3600 * rate

    return {
        "memory_slack": 1 - ok["peak_anon_bytes"].sum() / ok["memory_limit_bytes"].sum(),
        "memory_slack_median_range": (1 - per_range["peak_anon_bytes"] / per_range["memory_limit_bytes"]).median(),
        "memory_slack_by_tier": (1 - per_tier["peak_anon_bytes"] / per_tier["memory_limit_bytes"]).to_dict(),
        "oom_hit_share": df.groupby("range_key")["outcome"].apply(lambda o: (o == "oom").any()).mean(),
        "first_attempt_success": (first == "ok").mean(),
        # Seconds are measured ones: a time scale multiplies both sides of the ratio alike.
        "cost_efficiency": ok.apply(ideal, axis=1).sum() / df.apply(spent, axis=1).sum(),
    }


def test_L27_the_four_kpis_in_range_profile_and_the_summary_equal_pandas_over_the_records(demo):
    d, missions, proc = demo
    placement = deployment_catchup(load_location(d)).placement()
    cells = {
        row: printed(proc.stdout, row)
        for row in ("memory slack", "  median range", "OOM-hit ranges", "first-attempt success", "cost efficiency")
    }
    with dg.DagsterInstance.from_config(str(d / "dagster_home")) as instance:
        for i, mission in enumerate(missions):
            df = attempts(str(d / "storage"), mission)
            assert len(df) >= 4  # every range of the demo at least once
            want = pandas_kpis(df, placement)
            ui = latest_metadata(instance, "range_profile", mission)
            for key in ("memory_slack", "memory_slack_median_range", "oom_hit_share", "first_attempt_success"):
                assert ui[key] == pytest.approx(want[key], abs=1e-4), key
            assert ui["cost_efficiency"] == pytest.approx(want["cost_efficiency"], abs=1e-4)
            assert ui["memory_slack_by_tier"] == pytest.approx(want["memory_slack_by_tier"], abs=1e-4)
            assert "Autopilot" in ui["kpis"]
            # The summary prints the same figures, to a tenth of a percent.
            assert cells["memory slack"][i] == f"{want['memory_slack']:.1%}"
            assert cells["  median range"][i] == f"{want['memory_slack_median_range']:.1%}"
            assert cells["OOM-hit ranges"][i] == f"{want['oom_hit_share']:.1%}"
            assert cells["first-attempt success"][i] == f"{want['first_attempt_success']:.1%}"
            assert cells["cost efficiency"][i] == f"{want['cost_efficiency']:.1%}"
            assert 0 < want["cost_efficiency"] < 1 and 0 < want["memory_slack"] < 1
    # The unprofiled mission climbs the memory ladder through OOMs; the profiled one is sized from it.
    a, b = (pandas_kpis(attempts(str(d / "storage"), m), placement) for m in missions)
    assert b["oom_hit_share"] <= a["oom_hit_share"]
