"""The seed-shaped workload model holds the seed's figures (issue 6), deterministically."""

from __future__ import annotations

import statistics

import pyarrow.parquet as pq
import pytest

from catchup_assets.core.size.sizing import SizingPolicy
from catchup_assets.core.units import GiB
from catchup_assets.sim.workload import Workload
from catchup_assets.store.profiles import load_previous_profile


@pytest.fixture(scope="module")
def model() -> Workload:
    return Workload()


def quantile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[int(q * 100) - 1]


def test_runtimes_follow_the_seed(model):
    secs = [c.seconds for c in model]
    assert len(secs) == 4000 and all(c.range.length == 16_000 for c in model)
    assert 700 <= quantile(secs, 0.25) <= 850
    assert 2100 <= quantile(secs, 0.50) <= 2500
    assert 5.6 * 3600 <= max(secs) <= 6.2 * 3600


def test_longest_at_the_tip_and_the_41_45m_band_about_as_long(model):
    costs = list(model)
    longest = max(costs, key=lambda c: c.seconds)
    assert longest.range.first >= 0.95 * model.span.last_ledger
    tip = statistics.mean(c.seconds for c in costs[-100:])
    band = statistics.mean(c.seconds for c in costs if 41_000_000 <= c.range.first < 45_000_000)
    before = statistics.mean(c.seconds for c in costs if 36_000_000 <= c.range.first < 40_000_000)
    assert 0.75 * tip <= band <= 1.1 * tip
    assert before < 0.6 * band  # a band, not a plateau


def test_memory_from_under_one_to_about_fourteen_gib(model):
    peaks = [c.peak_anon_bytes for c in model]
    assert min(peaks) < 1 * GiB
    assert 13 * GiB <= max(peaks) <= 14.5 * GiB
    # A handful exceed the unprofiled limit, so a mission without a profile OOMs on a few.
    over = [c for c in model if c.peak_anon_bytes > SizingPolicy().unprofiled_memory_bytes]
    assert 3 <= len(over) <= 10
    assert all(c.replay_anon_bytes < c.peak_anon_bytes <= c.peak_working_set_bytes for c in model)


def test_about_seven_percent_of_ranges_are_reclaimed_and_draws_repeat(model):
    draws = [model.draw(c.key, 1) for c in model]
    share = sum(d.disrupt_at is not None for d in draws) / len(draws)
    assert 0.05 <= share <= 0.09
    assert all(0 < d.disrupt_at < 1 for d in draws if d.disrupt_at is not None)
    assert draws == [Workload().draw(c.key, 1) for c in model]  # deterministic from the seed
    other = [model.draw(c.key, 2) for c in model]
    assert other != draws  # each mission draws its own reclaims and runtimes


def test_another_seed_is_another_history():
    a, b = Workload(ranges=50, seed=0), Workload(ranges=50, seed=1)
    assert [c.seconds for c in a] != [c.seconds for c in b]
    assert [c.seconds for c in a] == [c.seconds for c in Workload(ranges=50, seed=0)]


def test_its_profile_is_a_profile_the_sizer_accepts(tmp_path, model):
    path = tmp_path / "range_profile.parquet"
    pq.write_table(model.profile_table(), path)
    prev = load_previous_profile(str(path))
    assert len(prev.index) == 4000
    tip = list(model)[-1]
    m = prev.index.lookup(tip.range.last)
    assert (m.peak_anon_bytes, m.seconds) == (tip.peak_anon_bytes, pytest.approx(tip.seconds))


def test_bad_size_is_refused():
    with pytest.raises(ValueError, match="ranges"):
        Workload(ranges=0)


def test_issue25_setup_grows_toward_the_tip_and_its_tip_is_a_parameter(model):
    """Setup is part of each range's seconds, least at genesis, most at the tip; the tip is a knob."""
    from dataclasses import replace

    costs = list(model)
    assert costs[0].setup_seconds < costs[len(costs) // 4].setup_seconds < costs[-1].setup_seconds
    assert costs[-1].setup_seconds == pytest.approx(1800.0, rel=0.02)
    assert all(0 < c.setup_seconds <= c.seconds / 2 for c in costs)
    for tip in (600.0, 3600.0):
        shaped = Workload(shape=replace(model.shape, setup_seconds=(30.0, tip)))
        assert list(shaped)[-1].setup_seconds == pytest.approx(tip, rel=0.02)
    row = model.profile_table().to_pylist()[-1]
    assert row["setup_seconds"] + row["replay_seconds"] == pytest.approx(row["seconds"])


def test_issue25_a_profile_older_than_the_setup_columns_sizes_as_before(tmp_path, model):
    """An old-schema profile (no setup_seconds, replay_seconds) loads and sizes from the same figures."""
    table = model.profile_table()
    old = table.drop_columns(["setup_seconds", "replay_seconds"])
    pq.write_table(table, tmp_path / "new.parquet")
    pq.write_table(old, tmp_path / "old.parquet")
    new_prev, old_prev = (load_previous_profile(str(tmp_path / n)) for n in ("new.parquet", "old.parquet"))
    assert len(old_prev.index) == len(new_prev.index) == 4000
    assert old_prev.seconds_by_key == new_prev.seconds_by_key
    for c in list(model)[::400]:
        a, b = old_prev.index.lookup(c.range.last), new_prev.index.lookup(c.range.last)
        assert (a.peak_anon_bytes, a.seconds) == (b.peak_anon_bytes, b.seconds)


def test_issue25_a_cut_piece_or_a_merged_run_costs_its_setup_then_its_ledgers(model):
    """What the replay runs a cut or merged range at: the setup of its first grid range, then its ledgers' replay."""
    from catchup_assets.core.plan.pieces import split
    from catchup_assets.core.values.ledger_range import LedgerRange, format_key

    tip = model.costs[-1]
    assert model.cost_of(tip.key) is tip  # a grid range: its own
    halves = [model.cost_of(p.key) for p in split(tip.range, 2)]
    # Each half pays the setup again; between them they replay the range's ledgers once.
    assert [h.setup_seconds for h in halves] == [tip.setup_seconds] * 2
    assert sum(h.seconds for h in halves) == pytest.approx(tip.seconds + tip.setup_seconds)
    assert sum(h.tx_apply_count for h in halves) == pytest.approx(tip.tx_apply_count, abs=2)
    assert all(h.peak_anon_bytes == tip.peak_anon_bytes for h in halves)
    old = model.costs[:3]
    run = model.cost_of(format_key(old[0].range.first, old[-1].range.last))
    # A merged run pays one setup, the first's, and peaks at the heaviest of its ranges.
    assert run.seconds == pytest.approx(sum(c.seconds for c in old) - old[1].setup_seconds - old[2].setup_seconds)
    assert run.peak_anon_bytes == max(c.peak_anon_bytes for c in old)
    with pytest.raises(ValueError, match="outside the workload's span"):
        model.cost_of(LedgerRange(tip.range.first, tip.range.last + 64).key)
