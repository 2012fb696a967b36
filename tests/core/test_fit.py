"""The fitted tier ladder (issue 15): cuts and node shapes chosen to make the next mission cheapest."""

from __future__ import annotations

import itertools
import random

import pytest

from catchup_assets.core.forecast.fit import FitSettings, chart_values, evaluate, fit_ladder
from catchup_assets.core.size.catalog import Catalog, NodeShape
from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure
from catchup_assets.core.size.sizing import MemoryLadder, Placement, SizingPolicy, Tier, Tiers
from catchup_assets.core.units import GiB
from catchup_assets.core.values.ledger_range import LedgerRange

# Per hour at 1 CPU a range: on "cpu" max(GiB, 1) / 8 dollars, on "mem" max(GiB / 16, 0.5).
CPU_NODE = NodeShape("cpu", 10 * GiB, 8, 2.5, 1.0, 8 * GiB, 8.0)
MEM_NODE = NodeShape("mem", 34 * GiB, 4, 5.0, 2.0, 32 * GiB, 4.0)
CATALOG = Catalog((CPU_NODE, MEM_NODE), "test")
# Memory requested = the anon peak (no margin, no headroom), and an OOM climbs to 16 GiB at most.
SIZING, OOM_LADDER = SizingPolicy(margin=1.0, cache_headroom_bytes=0), MemoryLadder(cap_bytes=16 * GiB)
PROTOSTAR = Tier("protostar", 14 * GiB, MEM_NODE.memory_bytes, 2, shape="mem")
NEBULA = Tier("nebula", 14 * GiB, MEM_NODE.memory_bytes, 2, shape="mem")
BASE = Placement(
    Tiers((Tier("all", 16 * GiB, MEM_NODE.memory_bytes, 1, shape="mem"),), PROTOSTAR, NEBULA),
    SIZING,
    OOM_LADDER,
    CATALOG,
)
STEP = FitSettings(step_bytes=GiB)


def profile(*ranges: tuple[float, float | None, float]) -> tuple[list[LedgerRange], ProfileIndex]:
    """Ranges of 1000 ledgers, each (anon GiB, working set GiB or None, seconds)."""
    rs = [LedgerRange(i * 1000 + 1, (i + 1) * 1000) for i in range(len(ranges))]
    ms = [
        RangeMeasure(r.last, int(a * GiB), None if ws is None else int(ws * GiB), s)
        for r, (a, ws, s) in zip(rs, ranges, strict=True)
    ]
    return rs, ProfileIndex(ms)


def ladder(result) -> list[tuple[float, str]]:
    return [(t.memory_cut_bytes / GiB, t.shape) for t in result.placement.tiers.ladder]


def test_the_optimum_by_hand():
    # 1 and 2 GiB cost 0.125 and 0.25 on cpu against 0.5 each on mem; 8 GiB costs 1.0 on cpu
    # against 0.5 on mem; 12 GiB does not fit cpu's 8 GiB (0.75 on mem). One hour each.
    rs, idx = profile((1, None, 3600), (2, None, 3600), (8, None, 3600), (12, None, 3600))
    best = fit_ladder(rs, idx, BASE, CATALOG, slots=4, settings=STEP)
    assert ladder(best) == [(2, "cpu"), (16, "mem")]  # the top cut is the memory ladder's cap
    assert best.cost.dollars == pytest.approx(0.125 + 0.25 + 0.5 + 0.75)
    # Flat: each range alone on the cheapest node that holds the largest (12 GiB): mem, $2 x 4 h.
    assert best.cost.flat_dollars == pytest.approx(8.0)
    one = fit_ladder(rs, idx, BASE, CATALOG, slots=4, settings=FitSettings(max_tiers=1, step_bytes=GiB))
    assert ladder(one) == [(16, "mem")] and one.cost.dollars == pytest.approx(0.5 * 3 + 0.75)
    assert best.forecast.makespan_seconds == 3600 and best.within_tolerance


def test_the_fit_reports_what_the_cost_model_says_of_its_ladder():
    rs, idx = profile((1, 3, 600), (3, None, 1200), (7, 12, 5000), (9, None, 100))
    result = fit_ladder(rs, idx, BASE, CATALOG, slots=2, settings=STEP)
    cost, f = evaluate(rs, idx, result.placement, 2)
    assert result.cost.dollars == pytest.approx(cost.dollars) and result.forecast == f


def brute_force(rs, idx, catalog: Catalog, max_tiers: int) -> float:
    """The cheapest ladder on the fit's grid, by trying every one (cuts below the top, a shape each)."""
    sizes = [BASE.size(r.last, idx).memory_request_bytes for r in rs]
    grid = sorted({-(-b // GiB) * GiB for b in sizes} - {16 * GiB})
    best = float("inf")
    for k in range(max_tiers):
        for cuts in itertools.combinations(grid, k):
            cuts = (*cuts, 16 * GiB)
            for shapes in itertools.product(catalog.shapes, repeat=len(cuts)):
                if any(c > s.allocatable_memory_bytes for c, s in zip(cuts, shapes, strict=True)):
                    continue
                pairs = enumerate(zip(cuts, shapes, strict=True))
                tiers = tuple(Tier(f"t{i}", c, s.memory_bytes, 1.0, shape=s.name) for i, (c, s) in pairs)
                p = Placement(Tiers(tiers, PROTOSTAR, NEBULA), SIZING, OOM_LADDER, catalog)
                best = min(best, evaluate(rs, idx, p, 4)[0].dollars)
    return best


def random_profile(rng: random.Random, n: int):
    # Working sets above the request bump a range one tier up (L27): the fit must price that.
    rows = []
    for _ in range(n):
        anon = rng.uniform(0.3, 11)
        rows.append((anon, rng.choice([None, anon * rng.uniform(0.8, 2.2)]), rng.uniform(60, 20000)))
    return profile(*rows)


@pytest.mark.parametrize("seed", range(6))
def test_the_fit_is_the_cheapest_ladder_on_its_grid(seed):
    rng = random.Random(seed)
    rs, idx = random_profile(rng, 7)
    result = fit_ladder(rs, idx, BASE, CATALOG, slots=4, settings=FitSettings(max_tiers=3, step_bytes=GiB))
    assert result.cost.dollars == pytest.approx(brute_force(rs, idx, CATALOG, 3))


@pytest.mark.parametrize("seed", range(10))
def test_adding_a_cheaper_shape_never_raises_the_cost(seed):
    rng = random.Random(100 + seed)
    rs, idx = random_profile(rng, 30)
    before = fit_ladder(rs, idx, BASE, CATALOG, slots=8, settings=STEP).cost.dollars
    memory = rng.choice([4, 8, 16, 24])
    cheaper = NodeShape("new", (memory + 2) * GiB, rng.choice([2, 4, 8]), 1.0, rng.uniform(0.05, 0.9),
                        memory * GiB, 1.9)  # fmt: skip
    after = fit_ladder(rs, idx, BASE, Catalog((*CATALOG.shapes, cheaper)), slots=8, settings=STEP).cost.dollars
    assert after <= before + 1e-9


def test_a_catalog_without_the_catch_alls_shape_gets_them_the_cheapest_that_holds_them():
    rs, idx = profile((1, None, 60))
    result = fit_ladder(rs, idx, Placement(sizing=SIZING, ladder=OOM_LADDER), CATALOG, slots=1, settings=STEP)
    # The default catch-alls (14 GiB, 2 CPUs; r6i.xlarge) move to the only shape that holds them.
    assert result.placement.shape_of("nebula") is MEM_NODE and result.placement.shape_of("protostar") is MEM_NODE


def test_a_catalog_that_cannot_hold_the_memory_ladder_s_cap_is_refused():
    rs, idx = profile((1, None, 60))
    small = Catalog((CPU_NODE, NodeShape("m2", 34 * GiB, 4, 5.0, 2.0, 15 * GiB, 4.0)))
    with pytest.raises(ValueError, match="memory ladder's cap"):
        fit_ladder(rs, idx, Placement(sizing=SIZING, ladder=OOM_LADDER), small, slots=1, settings=STEP)


def test_chart_values_of_the_fitted_ladder_load_as_the_same_ladder():
    """What fit-tiers prints is what the resource loads (test_chart.py renders the workload's fit with Helm)."""
    import yaml

    from catchup_assets.defs.resources.chart_keys import catalog_from_values
    from catchup_assets.defs.resources.placement import TierConfig

    rs, idx = profile((1, None, 3600), (2, None, 3600), (8, None, 3600), (12, None, 3600))
    result = fit_ladder(rs, idx, BASE, CATALOG, slots=4, settings=STEP)
    values = yaml.safe_load(chart_values(result.placement, with_catalog=True))
    assert values["tiers"] == [
        {"name": "dwarf", "memoryCutGib": 2, "shape": "cpu", "cpu": 1},
        {"name": "subgiant", "memoryCutGib": 16, "shape": "mem", "cpu": 1},
    ]
    catalog = catalog_from_values(values)
    assert catalog == CATALOG
    snake = {"memoryCutGib": "memory_cut_gib"}
    tiers = [TierConfig(**{snake.get(k, k): v for k, v in t.items()}).tier(catalog) for t in values["tiers"]]
    assert tuple(tiers) == result.placement.tiers.ladder


def test_the_plan_and_fit_tiers_commands_print_cost_tables(tmp_path, capsys):
    """`catchup-assets plan` and `fit-tiers` on the workload model; a bad catalog is refused naming its place."""
    import pyarrow.parquet as pq
    import yaml

    from catchup_assets.cli.main import run
    from catchup_assets.sim.workload import Workload

    prof = tmp_path / "model.parquet"
    pq.write_table(Workload(ranges=200).profile_table(), prof)
    assert run(["plan", "--profile", str(prof), "--parallelism", "50"]) == 0
    out = capsys.readouterr().out
    assert "tier             node   packing  ranges  node_hours  cost_usd" in out
    assert "flat  r6i.xlarge spot    1/node" in out and "ratio 0." in out and "assumed 40% of on-demand" in out

    assert run(["fit-tiers", "--profile", str(prof), "--parallelism", "50"]) == 0
    out = capsys.readouterr().out
    values = yaml.safe_load(out[: out.index("\n\n")])
    assert values["tiers"][-1]["memoryCutGib"] == 48 and values["noProfileTier"]["name"] == "nebula"
    head, default, fitted = out.split("\n\n")[1].splitlines()[:3]
    assert head.split()[:3] == ["ladder", "tiers", "ranges"] and "makespan_h" in head
    assert default.split()[0] == "default" and fitted.split()[0] == "fitted"
    assert "within 3% of its lower bound" in out

    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(yaml.safe_dump({"catalogSource": "ours", "catalog": [
        {"name": "big.one", "memoryGib": 64, "cpu": 16, "onDemandHourly": 0.8, "spotHourly": 0.3},
    ]}))  # fmt: skip
    assert run(["fit-tiers", "--profile", str(prof), "--catalog", str(catalog)]) == 0
    out = capsys.readouterr().out
    assert "shape: big.one" in out and "catalogSource: 'ours'" in out and "default" not in out.split("\n\n")[1]
    catalog.write_text(yaml.safe_dump([{"name": "x", "memoryGib": 8, "cpu": 2, "onDemandHourly": 0.1}]))
    assert run(["fit-tiers", "--profile", str(prof), "--catalog", str(catalog)]) == 2
    assert f"--catalog {catalog}[0]" in capsys.readouterr().err
