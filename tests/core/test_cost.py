"""The cost model and the price catalog (issue 15): what a range pays for, and what a mission costs."""

from __future__ import annotations

import dataclasses

import pytest

from catchup_assets.core.forecast.cost import Use, mission_cost, node_share
from catchup_assets.core.size.catalog import DEFAULT_CATALOG, Catalog, NodeShape, eks_allocatable
from catchup_assets.core.size.sizing import Placement, Tier, Tiers
from catchup_assets.core.units import GiB, MiB

# A node of 10 GiB and 4 CPUs allocatable: $1/h on-demand, $0.40 spot; another of 20 GiB at twice the price.
SMALL = NodeShape("small", 12 * GiB, 4, 1.0, 0.4, 10 * GiB, 4.0)
BIG = NodeShape("big", 24 * GiB, 8, 2.0, 0.8, 20 * GiB, 8.0)
CATALOG = Catalog((SMALL, BIG), "test prices")


def tier(name="t", cut=8, shape="small", cpu=1.0, pods=None, capacity="spot") -> Tier:
    node = {"small": SMALL, "big": BIG}[shape].memory_bytes
    return Tier(name, cut * GiB, node, cpu, pods, shape, capacity)


@pytest.mark.parametrize(
    "t, memory_gib, cpu, share",
    [
        (tier(), 2, 1.0, 0.25),  # CPU binds: 1 of 4 CPUs over 2 of 10 GiB
        (tier(), 5, 1.0, 0.5),  # memory binds: 5 of 10 GiB
        (tier(), 8, 0.5, 0.8),
        (tier(), 2, 4.0, 1.0),  # the whole node's CPUs
        (tier(), 12, 1.0, 1.0),  # never more than a node
        (tier(pods=1), 2, 1.0, 1.0),  # exclusive: a node per range, whatever it requests
        (tier(pods=2), 2, 1.0, 0.5),
    ],
)
def test_a_range_pays_for_the_share_of_the_node_it_requests(t, memory_gib, cpu, share):
    assert node_share(t, SMALL, memory_gib * GiB, cpu) == pytest.approx(share)


def placement(*tiers: Tier) -> Placement:
    catch_all = tier("catch", 8, "small", 1.0)
    return Placement(Tiers(tiers, catch_all, dataclasses.replace(catch_all, name="none")), catalog=CATALOG)


def test_mission_cost_by_hand():
    p = placement(tier("a", 8, "small", 1.0), tier("b", 16, "big", 2.0, capacity="on-demand"))
    c = mission_cost(
        [
            Use("a", 5 * GiB, 3600),  # half of small at $0.40 for 1 h: $0.20
            Use("a", 2 * GiB, 7200),  # a quarter (its CPU) for 2 h: $0.20
            Use("b", 15 * GiB, 3600),  # 15/20 of big on-demand ($2) for 1 h: $1.50
            Use("gone", 1 * GiB, 3600),  # a tier these settings do not have: not priced, counted
        ],
        p,
    )
    assert (c.dollars, c.spot_dollars, c.on_demand_dollars) == pytest.approx((1.9, 0.4, 1.5))
    assert c.all_on_demand_dollars == pytest.approx(0.5 + 0.5 + 1.5)
    assert c.node_hours == pytest.approx(0.5 + 0.5 + 0.75)
    assert (c.uses, c.unpriced) == (3, 1)
    assert {k: (v.uses, round(v.dollars, 6)) for k, v in c.by_tier.items()} == {"a": (2, 0.4), "b": (1, 1.5)}
    # Flat: every use on a node of its own that holds the largest request (15 GiB, 2 CPUs): big, at the
    # capacity type that request was placed at, for all 4 h.
    assert c.flat_shape == "big on-demand"
    assert c.flat_dollars == pytest.approx(2.0 * 4)
    assert c.ratio == pytest.approx(1.9 / 8)


def test_no_uses_cost_nothing_and_have_no_ratio():
    c = mission_cost([], placement(tier("a")))
    assert (c.dollars, c.flat_dollars, c.ratio, c.flat_shape) == (0.0, 0.0, None, "")


def test_allocatable_as_karpenter_estimates_it():
    # m6i.large: 8 GiB less 7.5% VM overhead, less kube-reserved for 29 pods (255 + 11 x 29 MiB) and
    # the 100 MiB eviction threshold; 2 CPUs less 6% of the first and 1% of the second.
    memory, cpu = eks_allocatable(8 * GiB, 2, 29)
    assert memory == int(8 * GiB * 0.925) - (255 + 319 + 100) * MiB
    assert cpu == pytest.approx(1.93)
    assert eks_allocatable(32 * GiB, 8, 58)[1] == pytest.approx(8 - 0.06 - 0.01 - 0.01 - 0.01)


@pytest.mark.parametrize(
    "name, on_demand, memory_gib, cpu",
    # As Karpenter's zz_generated.pricing_aws.go lists us-east-1 (generated 2026-01-19).
    [("c6i.large", 0.085, 4, 2), ("m6i.xlarge", 0.192, 16, 4), ("r6i.xlarge", 0.252, 32, 4),
     ("r6i.8xlarge", 2.016, 256, 32)],
)  # fmt: skip
def test_the_default_catalog(name, on_demand, memory_gib, cpu):
    s = DEFAULT_CATALOG.by_name(name)
    assert (s.on_demand_hourly, s.memory_bytes, s.cpu) == (on_demand, memory_gib * GiB, cpu)
    assert s.spot_hourly == pytest.approx(0.4 * on_demand)  # an assumption, said so in docs/cost.md
    assert 0.75 * s.memory_bytes < s.allocatable_memory_bytes < 0.925 * s.memory_bytes


def test_the_default_placement_resolves_every_tier_to_a_shape_that_holds_it():
    p = Placement()
    assert [p.shape_of(t.name).name for t in p.tiers.all()] == [
        "m6i.large", "r6i.large", "r6i.xlarge", "r6i.2xlarge", "r6i.4xlarge", "r6i.8xlarge", "r6i.xlarge", "r6i.xlarge"
    ]  # fmt: skip
    for t in p.tiers.all():
        s = p.shape_of(t.name)
        assert t.memory_cut_bytes <= s.allocatable_memory_bytes and t.cpu <= s.allocatable_cpu
    # A scaled-down placement (the demo) keeps every share: memory and allocatable scale together.
    demo = p.scaled(1 / 200)
    assert node_share(demo.tiers.by_name("giant"), demo.shape_of("giant"), 15 * GiB // 200, 2) == pytest.approx(
        node_share(p.tiers.by_name("giant"), p.shape_of("giant"), 15 * GiB, 2), rel=1e-6
    )


@pytest.mark.parametrize(
    "bad, message",
    [
        (tier("x", shape="small", cut=11), "tier 'x': 1 x memory_cut 11 GiB exceeds"),
        (tier("x", cpu=5), "tier 'x': 1 x cpu 5 exceeds"),
        (tier("x", cut=6, pods=2), "tier 'x': 2 x memory_cut 6 GiB exceeds"),
        (dataclasses.replace(tier("x"), shape="huge"), "tier 'x': unknown shape 'huge'"),
        (dataclasses.replace(tier("x"), node_memory_bytes=24 * GiB), "tier 'x': node_memory 24 GiB is not shape small"),
        (
            dataclasses.replace(tier("x", cut=5), shape="", node_memory_bytes=6 * GiB),
            "tier 'x': no catalog shape has 6 GiB",
        ),
        (dataclasses.replace(tier("x"), capacity_type="reserved"), "tier 'x': capacity_type 'reserved'"),
    ],
)
def test_a_tier_its_node_cannot_hold_is_refused_naming_it(bad, message):
    with pytest.raises(ValueError) as e:
        placement(bad)
    assert message in str(e.value)


def test_a_tier_naming_only_node_memory_takes_the_cheapest_shape_that_holds_its_cpu():
    t = dataclasses.replace(tier("x"), shape="", node_memory_bytes=12 * GiB)
    assert placement(t).shape_of("x") is SMALL
    p = Placement(Tiers((Tier("y", 28 * GiB, 32 * GiB, 4),)))  # r6i.xlarge has 3.92 CPUs: m6i.2xlarge
    assert p.shape_of("y").name == "m6i.2xlarge"


def test_the_resource_takes_a_catalog_and_tiers_that_name_shapes():
    from catchup_assets.defs.resources import CatchupResource

    r = CatchupResource(
        catalog=[
            {"name": "n1", "memory_gib": 16, "cpu": 4, "on_demand_hourly": 0.2, "spot_hourly": 0.05},
            {"name": "n2", "memory_gib": 64, "cpu": 8, "on_demand_hourly": 0.5, "spot_hourly": 0.2,
             "allocatable_memory_gib": 60, "allocatable_cpu": 7.5},
        ],
        catalog_source="our price sheet, 2026-02",
        tiers=[
            {"name": "small", "memory_cut_gib": 10, "shape": "n1", "cpu": 1},
            {"name": "large", "memory_cut_gib": 50, "shape": "n2", "cpu": 2, "capacity_type": "on-demand",
             "exclusive": True},
        ],
        unprofiled_tier={"name": "u", "memory_cut_gib": 14, "shape": "n2", "cpu": 2},
        no_profile_tier={"name": "np", "memory_cut_gib": 14, "node_memory_gib": 64, "cpu": 2},
    )  # fmt: skip
    p = r.placement()
    assert p.catalog.source == "our price sheet, 2026-02"
    large = p.tiers.by_name("large")
    assert (large.node_memory_bytes, large.capacity_type, large.exclusive) == (64 * GiB, "on-demand", True)
    assert p.shape_of("small").allocatable_cpu == pytest.approx(4 - 0.06 - 0.01 - 0.005 - 0.005)
    assert p.shape_of("np").name == "n2"


@pytest.mark.parametrize(
    "settings, field",
    [
        ({"tiers": [{"name": "x", "memory_cut_gib": 3, "shape": "z9.huge", "cpu": 1}]}, "tier 'x': unknown shape"),
        ({"tiers": [{"name": "x", "memory_cut_gib": 3, "cpu": 1}]}, "tier 'x': give a shape or node_memory_gib"),
        (
            {"tiers": [{"name": "x", "memory_cut_gib": 3, "shape": "m6i.large", "cpu": 1, "exclusive": True,
                        "pods_per_node": 2}]},
            "tier 'x': exclusive means one range per node",
        ),
        ({"tiers": [{"name": "x", "memory_cut_gib": 7, "shape": "m6i.large", "cpu": 1}]}, "tier 'x': 1 x memory_cut"),
        ({"catalog": [{"name": "n", "memory_gib": 8, "cpu": 2, "on_demand_hourly": 0.1}]}, "spot_hourly"),
        ({"catalog": [{"name": "n", "memory_gib": 8, "cpu": 2, "on_demand_hourly": -1, "spot_hourly": 1}]},
         "on_demand_hourly"),
        ({"tiers": [{"name": "x", "memory_cut_gib": 3, "shape": "m6i.large", "cpu": 1, "capacity_type": "cheap"}]},
         "capacity_type"),
    ],
)  # fmt: skip
def test_the_resource_refuses_a_bad_catalog_or_tier_at_load_naming_it(settings, field):
    import pydantic

    from catchup_assets.defs.resources import CatchupResource

    with pytest.raises(pydantic.ValidationError) as e:
        CatchupResource(**settings)
    assert field in str(e.value)


def test_a_mission_summary_counts_every_attempt_and_says_whether_the_profile_paid():
    from catchup_assets.core.values.attempt_record import AttemptRecord
    from catchup_assets.mission.report import cost_verdict, summarize

    p = placement(tier("a", 8, "small", 1.0))

    def rec(attempt, outcome, memory_gib, seconds):
        return AttemptRecord(
            "m", "k1", attempt, outcome, seconds=seconds, tier="a", memory_request_bytes=memory_gib * GiB
        )

    # An OOM at 5 GiB for 10 s, then the retry at 8 GiB for 20 s, in a simulation 360x sped up: 1 h + 2 h.
    unprofiled = summarize("a", [rec(1, "oom", 5, 10.0), rec(2, "ok", 8, 20.0)], p, 1, time_scale=360)
    assert unprofiled.cost.dollars == pytest.approx(0.5 * 0.4 * 1 + 0.8 * 0.4 * 2)
    assert unprofiled.predicted is None and unprofiled.oom_retries == 1
    plan = [{"tier": "a", "memory_request_bytes": 5 * GiB, "predicted_seconds": 20.0}]
    profiled = summarize("b", [rec(1, "ok", 5, 20.0)], p, 1, time_scale=360, plan_rows=plan)
    assert profiled.cost.dollars == profiled.predicted.dollars == pytest.approx(0.5 * 0.4 * 2)
    assert cost_verdict(unprofiled, profiled) == "the profiled mission cost 48% of the unprofiled one"
    assert "cost MORE than the unprofiled one" in cost_verdict(profiled, unprofiled)
