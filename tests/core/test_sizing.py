import pytest

from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure
from catchup_assets.core.size.sizing import MemoryLadder, Placement, SizingPolicy, Tiers
from catchup_assets.core.units import GiB

T = Tiers()
P = SizingPolicy()  # margin 1.25, headroom 1 GiB
PLACE = Placement(T, P, MemoryLadder())


def profile(*measures):
    return ProfileIndex([RangeMeasure(*m) for m in measures])


PROF = profile((16000, 1 * GiB, 1 * GiB, 600.0), (32000, 4 * GiB, 4 * GiB, 1200.0), (64000, 10 * GiB, 8 * GiB, 9000.0))


@pytest.mark.parametrize(
    "last, expected_end",
    [(16000, 16000), (20000, 32000), (32000, 32000), (48000, 64000), (64000, 64000), (64001, None), (1, 16000)],
)
def test_L25_lookup_exact_else_nearest_measured_end_above(last, expected_end):
    m = PROF.lookup(last)
    assert (m.last_ledger if m else None) == expected_end


def test_L25_measurement_free_entry_never_captures_ranges_below_it():
    idx = ProfileIndex([RangeMeasure(1200, None), RangeMeasure(1600, 5 * GiB)])
    assert idx.lookup(1100).peak_anon_bytes == 5 * GiB


@pytest.mark.parametrize(
    "anon, ws, tier, memory",
    [
        (1 * GiB, None, "dwarf", int(2.25 * GiB)),  # 1*1.25+1 = 2.25 GiB
        (5 * GiB, None, "subgiant", int(7.25 * GiB)),  # past dwarf's 6.5 GiB cut
        (4 * GiB, 5 * GiB, "dwarf", 6 * GiB),
        (4 * GiB, 7 * GiB, "subgiant", 6 * GiB),  # L27: working set above dwarf's cut: one tier up
        (10 * GiB, 12 * GiB, "subgiant", int(13.5 * GiB)),  # exactly at subgiant's cut
        (11 * GiB, None, "giant", int(14.75 * GiB)),
        (14 * GiB, 14 * GiB, "giant", int(18.5 * GiB)),
    ],
)
def test_L27_memory_from_anon_times_margin_plus_headroom_and_smallest_tier(anon, ws, tier, memory):
    s = PLACE.size(1000, profile((1000, anon, ws, 1.0)))
    assert (s.tier, s.memory_request_bytes, s.memory_limit_bytes, s.profiled) == (tier, memory, memory, True)


def test_L19_working_set_never_sizes_memory():
    # 862 MiB anon under a 12.7 GiB working set: memory comes from anon alone.
    s = PLACE.size(1000, profile((1000, 862 * 1024**2, int(12.7 * GiB), 1.0)))
    assert s.memory_request_bytes == int(862 * 1024**2 * 1.25 + GiB)


@pytest.mark.parametrize(
    "n_oom, tier, memory",
    [
        (0, "dwarf", 6 * GiB),
        (1, "subgiant", 9 * GiB),
        (2, "giant", int(13.5 * GiB)),
        (3, "supergiant", int(20.25 * GiB)),
    ],
)
def test_L6_each_oom_climbs_memory_and_one_tier(n_oom, tier, memory):
    s = PLACE.size(1000, profile((1000, int(4 * GiB), None, 1.0)), n_oom=n_oom)
    assert (s.tier, s.memory_request_bytes) == (tier, memory)


@pytest.mark.parametrize(
    "prof, last, tier, profiled",
    [
        (None, 1000, "nebula", False),
        (PROF, 70000, "protostar", False),
        (PROF, 1000, "dwarf", True),
        (ProfileIndex([]), 1000, "nebula", False),
    ],
)
def test_L15_placement_of_unprofiled_ranges(prof, last, tier, profiled):
    s = PLACE.size(last, prof)
    assert (s.tier, s.profiled) == (tier, profiled)
    if not profiled:
        assert s.memory_request_bytes == P.unprofiled_memory_bytes


def test_unprofiled_range_leaves_its_catch_all_tier_when_ooms_outgrow_it():
    s = PLACE.size(1000, None, n_oom=2)  # 12 GiB * 2.25 = 27 GiB > nebula's 14 GiB cut
    assert s.tier == "giant" and s.memory_request_bytes == 27 * GiB


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        (dict(margin=0.9), "margin"),
        (dict(cache_headroom_bytes=-1), "cache_headroom_bytes"),
        (dict(unprofiled_memory_bytes=0), "unprofiled_memory_bytes"),
    ],
)
def test_L34_bad_sizing_policy_names_the_field(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        SizingPolicy(**kwargs)


def test_L34_unknown_tier_is_refused_with_the_known_ones():
    with pytest.raises(ValueError, match="unknown tier 'giantess'.*dwarf"):
        T.by_name("giantess")


@pytest.mark.parametrize("name", ["bad name;$(x)", "Giant", "", "-edge", "x" * 64, "a.b"])
def test_L34_a_tier_name_that_cannot_be_a_label_is_refused_at_load(name):
    from catchup_assets.defs.resources import CatchupResource, TierConfig

    with pytest.raises(Exception, match="DNS-1123 label"):
        CatchupResource(tiers=[TierConfig(name=name, memory_cut_gib=1, node_memory_gib=2, cpu=1)])
