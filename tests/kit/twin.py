"""What the twin mission must leave, on either tier: kubesim (tests/backends) or the real control plane (tests/k8s)."""

from __future__ import annotations

import fsspec

from catchup_assets.core.measure.logparse import parse_worker_log
from catchup_assets.core.units import GiB
from catchup_assets.mission.profile import build_profile, build_tier_map
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import A, B, C, D, chain


def check_twin(cfg, result, slack: float = 0.0) -> None:
    """The records, profile and tier map of a clean run of the twin mission (kit.k8s_backend.script).

    `slack`: mission seconds a wall clock may move the estimate either way: the node goes at the virtual
    kubelet's next sync after the script's 200 s (later), and a loaded machine runs the pass that last saw
    the pod more than one poll before it (earlier)."""
    assert result.condemned.keys() == {C} and sorted(result.done) == sorted([A, B, D])
    records, done = RecordStore(Store(cfg.storage_root), "m1").load()
    assert done == set(records)
    a = chain(records, A)
    assert [r.outcome for r in a] == ["oom", "ok"]  # L6: next rung, by OOM count
    assert [r.memory_limit_bytes for r in a] == [12 * GiB, 18 * GiB]
    assert [r.tier for r in a] == ["nebula", "giant"]  # L15 placement follows the request
    b = chain(records, B)
    assert [r.outcome for r in b] == ["disrupted", "ok"]
    # L22: its pod went with the node; the leg ran from its start to when it was last seen running,
    # one 10 s poll at most before the reclaim at 200 s, summed, marked estimated. Not until PodGC
    # failed the pod (40 s and more later): from the reclaim on, it was Running on a node gone.
    assert b[0].finished_at is None and b[0].seconds_estimated is True, b[0]
    assert 190 - slack <= b[0].seconds <= 200 + slack, b[0]
    assert b[1].seconds_estimated is False and b[1].seconds == 300
    assert b[1].fresh_start is False and b[1].resumed_from_ledger == 59_870_000  # same PVC, resumed
    # L19: anon, working set and disk, each as the kubelet's summary reported it
    assert [(r.peak_anon_bytes, r.peak_working_set_bytes, r.peak_ephemeral_bytes) for r in b] == [
        (9 * GiB, 10 * GiB, 2 * GiB),
        (3 * GiB, 4 * GiB, 2 * GiB),
    ]
    assert [r.outcome for r in chain(records, C)] == ["failed"]
    profile = {r["range_key"]: r for r in build_profile(cfg.storage_root, "m1").profile.to_pylist()}
    # L21, L22. Attempt 1's pod went with its node before anything read it: its exit report is in
    # its log, shipped by attempt 2 after its record was written, not in the record.
    assert b[0].tx_apply_count is None and b[1].tx_apply_count == 700
    with fsspec.open(b[0].log_path, "rb", compression="gzip") as f:
        assert parse_worker_log(f.read().decode().splitlines()).tx_apply_count == 1000
    assert profile[B]["peak_anon_bytes"] == 9 * GiB and profile[B]["tx_apply_count"] == 700
    assert profile[B]["seconds"] == b[0].seconds + 300 and profile[B]["seconds_estimated"] is True
    assert profile[D]["seconds_estimated"] is False and profile[D]["peak_ephemeral_bytes"] == 2 * GiB, chain(records, D)
    tiers = {r["range_key"]: r["tier"] for r in build_tier_map(cfg.storage_root, "m1")[0].to_pylist()}
    assert tiers[D] == "subgiant"  # anon 2 GiB alone fits dwarf (6.5 GiB); its 8 GiB working set does not
    assert profile[A]["peak_anon_bytes"] == 14 * GiB and profile[A]["oom_floor_bytes"] == 12 * GiB


def profile_differences(rows: list[dict], others: list[dict]) -> dict[str, dict[str, tuple]]:
    """Each range's profile columns whose values differ between two runs: (this run's, the other's)."""
    theirs = {r["range_key"]: r for r in others}
    assert [r["range_key"] for r in rows] == [r["range_key"] for r in others]
    return {
        r["range_key"]: {k: (v, theirs[r["range_key"]][k]) for k, v in r.items() if theirs[r["range_key"]][k] != v}
        for r in rows
    }
