import pytest

from catchup_assets.core.plan.ranges import MissionSpan, contiguous_groups, plan_ranges
from catchup_assets.core.values.ledger_range import LedgerRange, RangeKeyError, dispatch_order, format_key, parse_key


@pytest.mark.parametrize(
    "first, last, key",
    [
        (1, 16000, "0000000001-0000016000"),
        (59904001, 59920000, "0059904001-0059920000"),
        (5, 5, "0000000005-0000000005"),
    ],
)
def test_key_round_trip(first, last, key):
    assert format_key(first, last) == key
    assert parse_key(key) == LedgerRange(first, last)


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "1-16000",
        "0000016000-0000000001",
        "0000000000-0000016000",
        "0000000001_0000016000",
        "0000000001-0000016000 ",
        "0000000001-0000016000\n",  # re.match with "$" would take it: it must be refused (fullmatch)
        "\n0000000001-0000016000",
        "../../etc-passwd",
        "000000001a-0000016000",
        None,
        7,
    ],
)
def test_bad_keys_are_refused_with_the_key_named(bad):
    with pytest.raises(RangeKeyError, match="does not parse"):
        parse_key(bad)


def test_grid_keeps_keys_stable_as_the_tip_grows_and_only_the_tip_is_partial():
    before = plan_ranges(MissionSpan(1, 100_000))
    after = plan_ranges(MissionSpan(1, 130_000))
    assert [r.key for r in before[:-1]] == [r.key for r in after[:6]]
    assert before[-1] == LedgerRange(96001, 100000)  # partial tip
    assert after[6] == LedgerRange(96001, 112000)  # now full: its key changed
    assert all(r.length == 16000 for r in after[:-1]) and after[-1].last == 130_000


def test_span_not_starting_on_the_grid_snaps_down_to_it():
    rs = plan_ranges(MissionSpan(20_000, 40_000))
    assert rs == [LedgerRange(16001, 32000), LedgerRange(32001, 40000)]


@pytest.mark.parametrize(
    "rng, overlap, arg",
    [
        (LedgerRange(16001, 32000), 320, "32000/16320"),
        (LedgerRange(1, 16000), 320, "16000/15999"),
        (LedgerRange(59904001, 59920000), 0, "59920000/16000"),
    ],
)
def test_catchup_argument_is_end_over_length_plus_overlap(rng, overlap, arg):
    assert rng.catchup_arg(overlap) == arg


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(first_ledger=0, last_ledger=10), "first_ledger"),
        (dict(first_ledger=10, last_ledger=5), "last_ledger"),
        (dict(first_ledger=1, last_ledger=5, ledgers_per_range=1000), "ledgers_per_range"),
        (dict(first_ledger=1, last_ledger=5, overlap=-1), "overlap"),
        # one mistyped field must not plan millions of ranges: refused before any is built
        (dict(first_ledger=1, last_ledger=1_000_000_000, ledgers_per_range=64), "max_ranges"),
        (dict(first_ledger=1, last_ledger=2**32), "last_ledger"),
        (dict(first_ledger=1, last_ledger=64000.5), "last_ledger"),
        (dict(first_ledger=True, last_ledger=64000), "first_ledger"),
        # issue 24: an overlap of 10^12 replayed every range from ledger 1; one of a whole range replays its neighbour
        (dict(first_ledger=1, last_ledger=64000, overlap=10**12), r"overlap \(1000000000000\) must be below"),
        (dict(first_ledger=1, last_ledger=64000, ledgers_per_range=640, overlap=640), "overlap .* ledgers_per_range"),
    ],
)
def test_L34_bad_span_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        MissionSpan(**kwargs)


RS = plan_ranges(MissionSpan(1, 64000))  # four ranges


@pytest.mark.parametrize(
    "order, seconds, expected",
    [
        ("tip-first", None, [3, 2, 1, 0]),
        ("oldest-first", None, [0, 1, 2, 3]),
        # longest measured first; the unmeasured one (index 2) goes before all of them
        ("longest-first", {0: 500.0, 1: 9000.0, 3: 100.0}, [2, 1, 0, 3]),
        ("longest-first", {}, [3, 2, 1, 0]),
    ],
)
def test_L13_dispatch_order(order, seconds, expected):
    secs = {RS[i].key: s for i, s in (seconds or {}).items()}
    assert dispatch_order(RS, order, secs) == [RS[i] for i in expected]


def test_L13_unknown_order_is_refused():
    with pytest.raises(ValueError, match="unknown order 'newest'"):
        dispatch_order(RS, "newest")


def test_the_range_cap_is_a_setting_and_the_seed_s_history_fits_the_default():
    assert len(plan_ranges(MissionSpan(1, 60_000_000, ledgers_per_range=12_800))) == 4688  # the seed's finest grid
    with pytest.raises(ValueError, match="into 4 ranges, more than max_ranges 3"):
        MissionSpan(1, 64000, max_ranges=3)


@pytest.mark.parametrize(
    "keys, order, groups, missing",
    [
        (["b", "c"], ["a", "b", "c", "d"], [["b", "c"]], []),
        (["d", "a", "b"], ["a", "b", "c", "d"], [["a", "b"], ["d"]], []),  # one run per span, in insertion order
        (["c", "a"], ["c", "a", "b"], [["c", "a"]], []),  # insertion order, not key order
        (["a", "a", "b"], ["a", "b"], [["a", "b"]], []),  # a repeated key counts once
        (["z", "a"], ["a"], [["a"]], ["z"]),
        ([], ["a"], [], []),
    ],
)
def test_keys_group_into_contiguous_spans_of_insertion_order(keys, order, groups, missing):
    assert contiguous_groups(keys, order) == (groups, missing)
