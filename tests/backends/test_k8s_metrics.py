"""On the simulated cluster, pods that cannot schedule are pending in the dispatcher's /metrics,
not running, and the age of the oldest grows until they are given up (issue 23; T1).

The metrics are scraped over HTTP between two passes, while the simulated cluster's clock moves.
"""

from __future__ import annotations

import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from catchup_assets.core.classify.outcomes import RetryPolicy
from catchup_assets.mission.metrics import MissionMetrics
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from kit.k8s_backend import SimClock, backend, mission, sim_cluster

UNSCHEDULABLE_SECONDS = 120


def scrape(port: int) -> dict[str, float]:
    """`name` or `name{label=value}` (the mission's label left out) -> value."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            rest = {k: v for k, v in s.labels.items() if k != "mission"}
            out[s.name + "".join(f"{{{k}={v}}}" for k, v in sorted(rest.items()))] = s.value
    return out


class ScrapingClock(SimClock):
    def __init__(self, kubelet, metrics: MissionMetrics):
        super().__init__(kubelet)
        self.metrics, self.seen = metrics, []

    def sleep(self, seconds: float) -> None:
        self.seen.append(scrape(self.metrics.port))
        super().sleep(seconds)


def test_pods_that_cannot_schedule_are_pending_not_running(tmp_path):
    with sim_cluster() as (api, kubelet):
        _unschedulable(api, kubelet, tmp_path)


def _unschedulable(api, kubelet, tmp_path):
    for n in range(3):  # no node of the tier a mission without a profile runs on
        kubelet.remove_node(f"nebula-{n}")
    cfg = mission(tmp_path, parallelism=4, retry=RetryPolicy(environmental=0))
    with MissionMetrics("m1", every_seconds=0) as metrics:
        metrics.serve(0, "127.0.0.1")
        clock = ScrapingClock(kubelet, metrics)
        be = backend(api, kubelet, tmp_path, unschedulable_seconds=UNSCHEDULABLE_SECONDS)
        result = run_mission(prepare(cfg), be, clock=clock, metrics=metrics)
        last = scrape(metrics.port)
    assert set(result.condemned) == {r for r in result.results}  # each rejected, its budget 0
    waiting = [m for m in clock.seen if m["catchup_live_attempts{phase=pending}"] == 4]
    assert waiting, "no scrape saw the four pods pending"
    for m in waiting:
        assert m["catchup_live_attempts{phase=running}"] == 0
        assert m["catchup_ranges{state=pending}"] == 4 and m["catchup_ranges{state=running}"] == 0
    ages = [m["catchup_oldest_pending_seconds"] for m in waiting]
    assert ages == sorted(ages) and ages[-1] >= UNSCHEDULABLE_SECONDS - cfg.poll_seconds
    assert last["catchup_attempts_total{outcome=rejected}"] == 4
    assert last["catchup_ranges{state=condemned}"] == 4 and last["catchup_oldest_pending_seconds"] == 0
