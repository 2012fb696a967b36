"""Ephemeral storage sized from the profile and climbing after evictions (issue 15)."""

from __future__ import annotations

import re

import pytest

from catchup_assets.core.size.disk import DiskPolicy
from catchup_assets.core.size.measures import ProfileIndex, RangeMeasure
from catchup_assets.core.size.sizing import Placement
from catchup_assets.core.units import GiB

MiB = 1024**2
POLICY = DiskPolicy(margin=1.25, factor=1.5, cap_bytes=100 * GiB, unprofiled_bytes=40 * GiB)


@pytest.mark.parametrize(
    "peak_gib, n_evicted, expected_gib",
    [
        (8, 0, 10),  # the peak x margin
        (8, 1, 15),  # one eviction of its own disk: x factor
        (8, 2, 22.5),
        (70, 1, 100),  # never past the cap
        (None, 0, None),  # no disk peak, never evicted: the deployment's flat request and limit
        (None, 1, 60),  # evicted without a peak: climbs from the flat limit
        (0, 0, None),
    ],
)
def test_disk_from_the_peak_times_margin_and_up_after_each_eviction(peak_gib, n_evicted, expected_gib):
    peak = None if peak_gib is None else int(peak_gib * GiB)
    got = POLICY.ephemeral_for(peak, n_evicted)
    assert got == (None if expected_gib is None else int(expected_gib * GiB))


@pytest.mark.parametrize(
    "settings, field", [({"margin": 0.9}, "margin"), ({"factor": 1.0}, "factor"), ({"cap_bytes": 0}, "cap_bytes")]
)
def test_a_disk_policy_that_cannot_climb_is_refused_naming_the_field(settings, field):
    with pytest.raises(ValueError, match=field):
        DiskPolicy(**settings)


def test_placement_sizes_disk_from_the_profile_and_the_range_s_evictions():
    p = Placement(disk=POLICY)
    profile = ProfileIndex([RangeMeasure(1000, 4 * GiB, None, 60.0, 8 * GiB)])
    assert p.size(1000, profile).ephemeral_bytes == 10 * GiB
    assert p.size(1000, profile, n_evicted=1).ephemeral_bytes == 15 * GiB
    assert p.size(1000, profile, n_oom=1).ephemeral_bytes == 10 * GiB  # an OOM says nothing about disk
    assert p.size(1000, None).ephemeral_bytes is None  # no profile: the flat figures
    assert p.size(1000, None, n_evicted=2).ephemeral_bytes == 90 * GiB
    # The demo's scale applies to disk too: its ranges' peaks are measured scaled.
    assert p.scaled(1 / 200).disk == DiskPolicy(1.25, 1.5, int(100 * GiB / 200), int(40 * GiB / 200))


def test_the_resource_takes_the_disk_policy_in_gib():
    from catchup_assets.defs.resources import CatchupResource

    assert CatchupResource(disk={"margin": 1.5, "cap_gib": 80}).placement().disk == DiskPolicy(1.5, 1.5, 80 * GiB)
    with pytest.raises(Exception, match="factor"):
        CatchupResource(disk={"factor": 0.5})


def test_an_evicted_range_gets_more_disk_on_each_retry_until_it_completes(tmp_path):
    """End to end on the local kubelet: the range outgrows the flat 4 MiB, is evicted (its own disk,
    L4), and each retry asks for 4x more, as the memory ladder climbs after an OOM."""
    from catchup_assets.backends.local.backend import LocalBackend
    from catchup_assets.core.plan.config import MissionConfig
    from catchup_assets.core.plan.ranges import MissionSpan
    from catchup_assets.mission.plan import prepare
    from catchup_assets.mission.run import run_mission
    from catchup_assets.store.records import RecordStore
    from catchup_assets.store.root import Store
    from scaled import scaled_placement

    cfg = MissionConfig(
        mission="disk",
        span=MissionSpan(59_904_001, 59_968_000, ledgers_per_range=64_000, overlap=320),
        storage_root=str(tmp_path / "storage"),
        parallelism=1,
        poll_seconds=0.1,
        placement=scaled_placement(
            64 * MiB, disk=DiskPolicy(factor=4.0, cap_bytes=1024 * MiB, unprofiled_bytes=4 * MiB)
        ),
        env={"SIM_SPEED": "10000", "SIM_MEMORY_SCALE": "0.001"},
    )
    backend = LocalBackend(tmp_path / "work", "disk", sample_interval=0.05, ephemeral_limit_bytes=4 * MiB)
    result = run_mission(prepare(cfg), backend)
    assert not result.condemned
    records = sorted(RecordStore(Store(cfg.storage_root), "disk").load()[0].values(), key=lambda r: r.attempt)
    outcomes = [r.outcome for r in records]
    assert outcomes[0] == "evicted" and outcomes[-1] == "ok" and set(outcomes) == {"evicted", "ok"}
    limits = [re.search(r"total limit of containers (\S+?)\.", r.reason)[1] for r in records if r.outcome == "evicted"]
    assert limits == ["4Mi", "16Mi", "64Mi", "256Mi"][: len(limits)]  # the flat limit, then x4 per eviction
