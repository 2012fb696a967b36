"""The forecast's spread read from the profile's history (issue 26 item 5): how far the profiled mission ran
from what its own plan predicted, on the storage root where both were written."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from catchup_assets.core.forecast.spread import DEFAULT_SIGMA
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.units import GiB
from catchup_assets.mission.plan import forecast_band, prepare
from catchup_assets.store import layout
from catchup_assets.store.root import Store
from catchup_assets.store.tables import PLAN_SCHEMA, PROFILE_SCHEMA, table, write_table

SPAN = MissionSpan(1, 20 * 16000, 16000)


def profiled_mission(root, ran_as_planned: bool) -> str:
    """Mission a on `root`: its plan predicted 1000 s a range; it ran +-20% off that (in log), or exactly."""
    store = Store(str(root))
    grid = plan_ranges(SPAN)
    plan = [
        {"range_key": r.key, "first_ledger": r.first, "last_ledger": r.last, "catchup": r.catchup_arg(0)}
        | {"dispatch_rank": i, "tier": "dwarf", "memory_request_bytes": 2 * GiB, "profiled": True}
        | {"predicted_seconds": 1000.0}
        for i, r in enumerate(grid)
    ]
    write_table(store, layout.plan("a"), table(plan, PLAN_SCHEMA))
    off = [0.0] * 20 if ran_as_planned else [0.2, -0.2] * 10
    rows = [
        {"range_key": r.key, "first_ledger": r.first, "last_ledger": r.last, "mission": "a", "completed": True}
        | {"peak_anon_bytes": GiB, "peak_working_set_bytes": GiB, "seconds": 1000.0 * math.exp(o)}
        for r, o in zip(grid, off, strict=True)
    ]
    path = root / "a" / "range_profile.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=PROFILE_SCHEMA), path)
    return str(path)


@pytest.mark.parametrize("ran_as_planned, sigma", [(False, 0.2), (True, 0.0)])
def test_the_next_mission_s_band_draws_the_spread_its_profile_s_mission_showed(tmp_path, ran_as_planned, sigma):
    profile = profiled_mission(tmp_path, ran_as_planned)
    cfg = MissionConfig("b", SPAN, str(tmp_path), parallelism=4, order="longest-first", previous_profile=profile)
    band = forecast_band(prepare(cfg))
    assert band.sigma == pytest.approx(sigma)
    assert (band.p90_seconds > band.p10_seconds) is (sigma > 0)


def test_a_profile_whose_mission_s_plan_is_not_on_the_root_draws_the_stated_default(tmp_path):
    profile = profiled_mission(tmp_path, ran_as_planned=False)
    other = tmp_path / "elsewhere"
    other.mkdir()
    cfg = MissionConfig("b", SPAN, str(other), parallelism=4, previous_profile=profile)
    assert forecast_band(prepare(cfg)).sigma == DEFAULT_SIGMA
