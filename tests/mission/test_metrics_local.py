"""Issue 23's first Done-when: a local mission's /metrics, scraped over HTTP and read with
prometheus_client's own text parser, equal its attempt records, between passes and at the
end; a dispatcher stopped mid-mission and started again continues them from the records (L10).

Real subprocesses, the real worker script, the simulated stellar-core. Each scrape is taken
while the dispatcher sleeps between two passes (its clock is the boundary faked here): nothing
is recorded then, so the records read at that moment are what the last pass left.
"""

from __future__ import annotations

import os
import signal
import urllib.request
from collections import Counter

import pytest
from prometheus_client.parser import text_string_to_metric_families

from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.dispatch.dispatch_config import SystemClock
from catchup_assets.core.forecast.cost import attempt_uses, mission_cost
from catchup_assets.core.plan.config import MissionConfig
from catchup_assets.core.plan.ranges import MissionSpan, plan_ranges
from catchup_assets.core.size.catalog import CAPACITY_TYPES
from catchup_assets.mission.metrics import MissionMetrics
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from scaled import scaled_placement

MiB = 1024**2
SPAN = MissionSpan(59_712_001, 59_968_000, ledgers_per_range=64_000, overlap=320)  # 4 ranges
FAILING = "0059712001-0059776000"  # its archive is corrupt: failed, condemned (failed budget 0)
SERIES = {
    "catchup_ranges": "gauge",
    "catchup_attempts": "counter",
    "catchup_retries_left": "gauge",
    "catchup_live_attempts": "gauge",
    "catchup_oldest_pending_seconds": "gauge",
    "catchup_attempt_peak_bytes": "histogram",
    "catchup_seconds_since_progress": "gauge",
    "catchup_profile_median_seconds": "gauge",
    "catchup_breaker_tripped": "gauge",
    "catchup_paused": "gauge",
    "catchup_draining": "gauge",
    "catchup_stalled": "gauge",
    "catchup_attempts_by_capacity": "counter",
    "catchup_cost_dollars": "gauge",
}
# L5: the budget each outcome spends (`ok` and `stopped` spend none).
BUDGET_OF = {
    "disrupted": "environmental",
    "evicted": "environmental",
    "rejected": "environmental",
    "unknown": "environmental",
    "oom": "oom",
    "interrupted": "ordinary",
    "deadline": "ordinary",
    "failed": "failed",
}


def scrape(port: int) -> dict[str, dict[tuple, float]]:
    """Sample name -> {its labels but the mission's, as sorted pairs: value}; every sample is of mission `m`."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out: dict[str, dict[tuple, float]] = {}
    types = {}
    for family in text_string_to_metric_families(text):
        types[family.name] = family.type
        for s in family.samples:
            assert s.labels.pop("mission") == "m"
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    assert {k: types.get(k) for k in SERIES} == SERIES
    return out


def by(samples: dict[tuple, float], label: str) -> dict[str, float]:
    return {dict(k)[label]: v for k, v in samples.items()}


def check_against_records(m: dict, cfg: MissionConfig, n_ranges: int) -> dict:
    """Every series the records decide, equal to the records; returns the records' counts."""
    recs, done = RecordStore(Store(cfg.storage_root), "m").load()
    finished = [r for i, r in recs.items() if i in done and r.outcome is not None]
    completed = {r.range_key for r in finished if r.outcome == "ok"}
    condemned = {r.range_key for r in finished if r.outcome == "failed"}  # the failed budget is 0
    ranges = by(m["catchup_ranges"], "state")
    assert ranges["done"] == len(completed) and ranges["condemned"] == len(condemned)
    assert sum(ranges.values()) == n_ranges and ranges["superseded"] == 0
    outcomes = Counter(r.outcome for r in finished)
    assert by(m.get("catchup_attempts_total", {}), "outcome") == outcomes
    capacity = Counter(r.capacity_type for r in finished)
    assert by(m["catchup_attempts_by_capacity_total"], "capacity_type") == {c: capacity[c] for c in CAPACITY_TYPES}
    peaks = [r.peak_anon_bytes for r in finished if r.peak_anon_bytes is not None]
    assert m["catchup_attempt_peak_bytes_count"][()] == len(peaks)
    assert m["catchup_attempt_peak_bytes_sum"][()] == sum(peaks)
    buckets = {float(le): v for le, v in by(m["catchup_attempt_peak_bytes_bucket"], "le").items()}
    assert list(buckets) == [2.0**e * 2**30 for e in range(-1, 6)] + [float("inf")]
    assert all(v == sum(1 for p in peaks if p <= le) for le, v in buckets.items())
    dollars = mission_cost(attempt_uses(finished), cfg.placement).dollars
    assert m["catchup_cost_dollars"][()] == pytest.approx(dollars, rel=1e-9)
    live = by(m["catchup_live_attempts"], "phase")
    assert live["pending"] + live["running"] == ranges["pending"] + ranges["running"] <= cfg.parallelism
    # Retries left: per budget, what each range not yet done or condemned may still spend, from its records.
    retry = cfg.retry
    allowed = {"environmental": retry.environmental, "oom": retry.oom_rungs - 1, "ordinary": retry.ordinary}
    allowed["failed"] = retry.failed
    left = dict.fromkeys(allowed, 0)
    for key in {r.key for r in plan_ranges(SPAN)} - completed - condemned:
        spent = Counter(BUDGET_OF[r.outcome] for r in finished if r.range_key == key and r.outcome in BUDGET_OF)
        for budget, n in allowed.items():
            left[budget] += max(0, n - spent[budget])
    assert by(m["catchup_retries_left"], "budget") == left
    for flag in ("breaker_tripped", "paused", "draining", "stalled"):
        assert m[f"catchup_{flag}"][()] == 0
    assert m["catchup_profile_median_seconds"][()] == 0  # unprofiled
    assert m["catchup_seconds_since_progress"][()] >= 0
    # The KPIs of sizing (docs/cost.md), computed here from the records alone.
    measured = [r for r in finished if r.outcome == "ok" and r.peak_anon_bytes is not None and r.memory_limit_bytes]
    if measured:
        slack = 1 - sum(r.peak_anon_bytes for r in measured) / sum(r.memory_limit_bytes for r in measured)
        assert m["catchup_memory_slack_ratio"][()] == pytest.approx(slack, rel=1e-9)
        tiers = {r.tier for r in measured}
        assert set(by(m["catchup_memory_slack_by_tier_ratio"], "tier")) == tiers
    keys = {r.range_key for r in finished}
    if keys:
        ooms = {r.range_key for r in finished if r.outcome == "oom"}
        assert m["catchup_oom_hit_ratio"][()] == pytest.approx(len(ooms) / len(keys))
        first = {}
        for r in sorted(finished, key=lambda r: r.attempt):
            if r.outcome != "stopped":  # an operator's stop is not the range's first try
                first.setdefault(r.range_key, r.outcome)
        ok_first = sum(1 for o in first.values() if o == "ok") / len(first)
        assert m["catchup_first_attempt_success_ratio"][()] == pytest.approx(ok_first)
        assert 0 < m["catchup_cost_efficiency_ratio"][()] <= 1 or not measured
    return {"done": len(completed), "attempts": outcomes}


class ScrapingClock(SystemClock):
    """The wall clock; between two passes it scrapes /metrics and checks it against the records,
    and, once `stop_after_done` ranges are done, sends this process a SIGTERM (an operator's stop)."""

    def __init__(self, metrics: MissionMetrics, cfg: MissionConfig, n: int, stop_after_done: int | None = None):
        super().__init__()
        self.metrics, self.cfg, self.n, self.stop_after_done = metrics, cfg, n, stop_after_done
        self.seen: list[dict] = []

    def sleep(self, seconds: float) -> None:
        if not self.woken:
            self.seen.append(check_against_records(scrape(self.metrics.port), self.cfg, self.n))
            if self.stop_after_done is not None and self.seen[-1]["done"] >= self.stop_after_done:
                self.stop_after_done = None
                os.kill(os.getpid(), signal.SIGTERM)
        super().sleep(seconds)


def test_L10_metrics_equal_the_records_and_continue_from_them_after_a_restart(tmp_path):
    cfg = MissionConfig(
        mission="m",
        span=SPAN,
        storage_root=str(tmp_path / "storage"),
        parallelism=2,
        placement=scaled_placement(64 * MiB, 4 * MiB),
        poll_seconds=0.1,
        breaker_attempts=0,  # off: a failure is condemned on its record, not held to tell a systemic one
        env={"SIM_SPEED": "40000", "SIM_MEMORY_SCALE": "0.001", "SIM_FAIL_TARGETS": FAILING[-8:]},
    )
    n = 4

    # The first dispatcher: stopped by a SIGTERM once a range is done, its attempts in flight recorded `stopped`.
    with MissionMetrics("m", every_seconds=0) as metrics:
        port = metrics.serve(0, "127.0.0.1")  # a free port
        clock = ScrapingClock(metrics, cfg, n, stop_after_done=1)
        first = run_mission(
            prepare(cfg), LocalBackend(tmp_path / "work", "m", sample_interval=0.05), clock=clock, metrics=metrics
        )
        assert first.stopped and len(first.done) < n
        end = check_against_records(scrape(port), cfg, n)  # at the end, the server still up
    assert clock.seen[0]["done"] == 0 and end["done"] >= 1 and end["attempts"]["stopped"] >= 1

    # A restarted dispatcher, a new server: its first scrape starts where the records are, not at zero.
    with MissionMetrics("m", every_seconds=0) as metrics:
        metrics.serve(0, "127.0.0.1")
        clock = ScrapingClock(metrics, cfg, n)
        again = run_mission(
            prepare(cfg), LocalBackend(tmp_path / "work", "m", sample_interval=0.05), clock=clock, metrics=metrics
        )
        last = check_against_records(scrape(metrics.port), cfg, n)
    start = clock.seen[0]
    assert start["done"] >= end["done"] >= 1
    assert all(start["attempts"][o] >= k for o, k in end["attempts"].items())
    assert sorted(again.done) == sorted(set(again.results) - {FAILING}) and FAILING in again.condemned
    assert last["done"] == n - 1
    with pytest.raises(OSError):  # closed with its mission
        urllib.request.urlopen(f"http://127.0.0.1:{metrics.port}/metrics", timeout=2)
