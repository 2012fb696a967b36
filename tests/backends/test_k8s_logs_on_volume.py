"""Logs are not lost with their pod: whole Kubernetes missions on the simulated cluster (L30, L31).

The real dispatcher and KubernetesBackend; the simulated kubelet keeps each
worker's log on the range's PVC and ships earlier files at a pod's start as
entrypoint.sh does (kubesim/kube_volumes.py). Assertions are on the logs
and records on storage and on the requests the API server received.
"""

from __future__ import annotations

import gzip
import re
from collections import Counter

import fsspec
import pytest

from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import NS, SPAN, A, SimClock, backend, flat, medida, mission, sim_cluster
from kubesim.kube_script import Script

GiB = 1024**3
ONE_RANGE = MissionSpan(59_904_001, 59_968_000, ledgers_per_range=64_000, overlap=320)
STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}")
LOG_PATH = re.compile(rf"^/api/v1/namespaces/{NS}/pods/(catchup-m1-\d{{10}}-\d{{10}}-a\d{{3}})-\w+/log$")


@pytest.fixture
def cluster():
    with sim_cluster() as c:
        yield c


def stored_lines(url: str) -> list[str]:
    """The log stored at url, each core timestamp put back as the script's "{now}"."""
    with fsspec.open(url, "rb") as f:
        return [STAMP.sub("{now}", line) for line in gzip.decompress(f.read()).decode().splitlines()]


def test_L31_a_reclaimed_attempt_s_log_reaches_its_url_through_the_next_attempt(cluster, tmp_path):
    """Attempt 1's node is reclaimed mid-run and its pod goes with it, unread; attempt 2 resumes on
    the same PVC, and its worker ships attempt 1's file from the volume."""
    api, kubelet = cluster
    first = [
        (0.0, "RESUME DECLINED: no range marker in the data dir (never started here)"),
        (50.0, "{now} [Tx INFO] applying ledger 59904500 (txs:412, ops:830)"),
        (150.0, "{now} [Tx INFO] applying ledger 59950000 (txs:398, ops:801)"),
        *[(300.0, line) for line in medida(999)],  # the exit report it never got to print
    ]
    second = ["RESUME: range x from LCL 59950000 toward target 59968000", *medida(700)]

    def scripts(job):
        if job["metadata"]["labels"]["catchup.stellar.org/attempt"] == "1":
            disrupt = {"disrupt": "TerminationByKubelet", "disrupt_mode": "node_gone"}
            return Script(duration=200, memory=flat(GiB, 2 * GiB), lines=first, **disrupt)
        return Script(duration=100, memory=flat(GiB, 2 * GiB), lines=second)

    kubelet.script = scripts
    cfg = mission(tmp_path, span=ONE_RANGE)
    run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    records, done = RecordStore(Store(cfg.storage_root), "m1").load()
    one, two = records[(A, 1)], records[(A, 2)]
    assert [one.outcome, two.outcome] == ["disrupted", "ok"] and done == {(A, 1), (A, 2)}
    # Attempt 1's log is what it wrote before the reclaim, as its volume kept it.
    assert stored_lines(one.log_path) == [line for t, line in first if t < 200]
    # Attempt 2's log holds attempt 2's lines only, and its metrics are its own.
    assert stored_lines(two.log_path) == second
    assert (two.tx_apply_count, two.resumed_from_ledger, two.fresh_start) == (700, 59_950_000, False)
    assert one.tx_apply_count is None  # never printed: the report came after the reclaim
    assert api.store.list("persistentvolumeclaims", NS) == []  # the range completed: its PVC is freed (L3)


def test_L30_L31_a_pod_s_log_is_read_once_when_it_ends_never_while_it_runs(cluster, tmp_path):
    """Attempts of 20000 s, a pass every 600 s: each pod's log is read exactly once, by the final
    read. (Interim reads every 1800 s would have read each about a dozen times.)"""
    api, kubelet = cluster
    kubelet.script = lambda job: Script(duration=20_000, memory=flat(GiB, 2 * GiB), lines=["one", *medida(5)])
    cfg = mission(tmp_path, span=SPAN, poll_seconds=600)
    api.requests.reset()
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    assert sorted(result.done) == sorted(result.results) and len(result.done) == 4
    reads = Counter(
        m.group(1) for method, path, *_ in api.requests.recent if method == "GET" and (m := LOG_PATH.match(path))
    )
    assert api.requests.count("get", "pods/log") == sum(reads.values()) == 4
    assert sorted(reads.values()) == [1, 1, 1, 1] and len(reads) == 4  # one read of each attempt's pod
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    assert [r.tx_apply_count for r in records.values()] == [5, 5, 5, 5]  # that one read had it all
