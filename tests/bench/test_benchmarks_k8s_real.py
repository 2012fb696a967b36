"""Smoke version of the real-control-plane benchmark (`benchmarks.k8s_real`), so it cannot rot. No timing is asserted.

In the k8s tier (`uv run pytest -m k8s`): it starts control planes of its own (tools/k8s/build.sh's binaries),
one per real run, each stopped (every process, every port) before the benchmark returns.
"""

from __future__ import annotations

import psutil
import pytest

from benchmarks import k8s_real
from benchmarks.harness.report import table_rows

pytestmark = pytest.mark.k8s


def test_k8s_real_smoke(tmp_path):
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    out = k8s_real.main(["--smoke", "--out", str(tmp_path)])
    sim, real = out["missions"]
    # The same mission on both clusters, every range done; the real one's requests are the API server's own.
    for run in (sim, real):
        assert run.mission.statuses == {"done": run.mission.shape.ranges} and run.mission.attempts == 4
        for kind in ("jobs", "persistentvolumeclaims"):
            assert run.requests[("create", kind)] == run.requests[("delete", kind)] == 4
        assert run.mission.log_reads["final"] == 4 and run.mission.log_reads["doomed"] == 0
        assert run.requests[("get", "nodes/stats")] > 0  # each node's kubelet, read directly
    assert real.requests[("list", "jobs")] >= 1 and real.requests[("watch", "pods")] > 0
    assert real.cloud.syncs > 0 and real.cloud.errors == 0
    assert set(real.rss_all_running) >= {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}
    # The first pass on kwok nodes: 6 Jobs stored, 6 pods made by the Job controller, 6 volumes made and
    # claims bound, 6 pods bound by the scheduler and run by kwok.
    [first] = out["first_pass"]
    assert [s.count for s in first.timeline] == [6] * 6
    assert all(first.rss_all_running[name] > 0 for name in ("kube-apiserver", "kwok"))
    text = (tmp_path / "k8s_real.md").read_text()
    assert "command: `uv run python -m benchmarks.k8s_real" in text
    rows = table_rows(text, "API requests per attempt, kubesim and real")
    assert any(r[0].startswith("**per attempt, no informer LISTs") for r in rows)
    assert len(table_rows(text, "The first pass at 6 slots")) == 9  # the first pass and 6 stages, kubesim's 2
    # Nothing left running: every control plane, cloud and mission process this test started has ended
    # (multiprocessing's resource tracker, which a spawned child starts, lives as long as this interpreter).
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before and p.is_running()]
    left = [p for p in left if p.status() != psutil.STATUS_ZOMBIE and "resource_tracker" not in " ".join(p.cmdline())]
    assert left == []
