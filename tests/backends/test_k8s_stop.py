"""An operator's stop on the simulated cluster: SIGTERM to the dispatching process (L37).

The signal is a real one, sent to this process while `run_mission` dispatches in
its main thread (as a run worker's step does); the assertions are on what the API
server holds and on the attempt records, then on a second run over the same ranges.
"""

from __future__ import annotations

import os
import signal

import pytest

from catchup_assets.backends.kubernetes.names import pvc_name
from catchup_assets.core.classify.outcomes import decide
from catchup_assets.core.dispatch.range_book import past_attempts
from catchup_assets.core.units import GiB
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import NS, B, D, SimClock, backend, chain, flat, mission, sim_cluster
from kubesim.kube_script import Script


@pytest.fixture
def cluster():
    with sim_cluster() as c:
        yield c


class SignalAt(SimClock):
    """The cluster's clock, and a SIGTERM to this very process once simulated time passes `at`."""

    def __init__(self, kubelet, at: float):
        super().__init__(kubelet)
        self.at = kubelet.clock() + at
        self.sent = False

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if not self.sent and self.time() >= self.at:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)


def test_L37_sigterm_during_dispatch_deletes_the_jobs_records_them_stopped_and_the_next_run_completes(
    cluster, tmp_path
):
    api, kubelet = cluster
    kubelet.script = lambda job: Script(duration=300, memory=flat(1 * GiB, 2 * GiB))
    cfg = mission(tmp_path, parallelism=2)
    keys = [B, D]
    before = signal.getsignal(signal.SIGTERM)
    result = run_mission(prepare(cfg, keys), backend(api, kubelet, tmp_path), clock=SignalAt(kubelet, at=60))
    assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back
    assert result.stopped == "stopped by the operator (SIGTERM)"
    assert result.condemned == {} and result.done == []
    assert {r.status for r in result.results.values()} == {"not_run"}
    # L37: nothing of the mission runs on in the cluster; the ranges' volumes stay for the resume.
    assert api.store.list("jobs", NS) == [] and api.store.list("pods", NS) == []
    assert sorted(p["metadata"]["name"] for p in api.store.list("persistentvolumeclaims", NS)) == sorted(
        pvc_name("m1", k) for k in keys
    )
    assert api.requests.count("create", "jobs") == 2  # no dispatch after the signal
    records = RecordStore(Store(cfg.storage_root), "m1")
    recs, done = records.load()
    assert done == set(recs) == {(B, 1), (D, 1)}
    for key in keys:
        (rec,) = chain(recs, key)
        assert rec.outcome == "stopped" and "SIGTERM" in rec.reason
        assert rec.started_at is not None and rec.memory_limit_bytes  # what is known of it is kept
        decision = decide(past_attempts({1: rec}, {1}), cfg.retry)
        assert decision.action == "retry" and not any(decision.counts.values())  # no budget spent

    again = run_mission(prepare(cfg, keys), backend(api, kubelet, tmp_path / "next"), clock=SimClock(kubelet))
    assert again.stopped is None and sorted(again.done) == sorted(keys) and again.condemned == {}
    recs, done = records.load()
    assert done == set(recs)
    assert {k: [r.outcome for r in chain(recs, k)] for k in keys} == {B: ["stopped", "ok"], D: ["stopped", "ok"]}
    assert api.store.list("jobs", NS) == [] and api.store.list("persistentvolumeclaims", NS) == []
