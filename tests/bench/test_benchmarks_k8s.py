"""Smoke versions of the Kubernetes API and dispatcher-cost benchmarks, so they cannot rot. No timing is asserted."""

from __future__ import annotations

import math

from benchmarks import dispatcher_cost, first_pass, k8s_api, start_memory
from benchmarks.harness.report import table_rows


def test_k8s_api_smoke(tmp_path):
    [run] = k8s_api.main(["--smoke", "--out", str(tmp_path)])
    text = (tmp_path / "k8s_api.md").read_text()
    assert "machine:" in text and "command: `uv run python -m benchmarks.k8s_api" in text
    # Every range ran once and ended done; nothing is left on the server.
    assert {r.status for r in run.result.results.values()} == {"done"}
    assert run.attempts == run.mission.ranges and run.jobs_left == 0
    counts = run.requests
    for kind in ("jobs", "persistentvolumeclaims"):
        assert counts[("create", kind)] == counts[("delete", kind)] == run.attempts
    # Issue 26 item 2: listed once, then one watch poll per pass after the first.
    assert counts[("list", "jobs")] == counts[("list", "pods")] == 1
    assert counts[("watch", "jobs")] == counts[("watch", "pods")] == run.passes - 1
    assert counts[("get", "nodes/stats")] > 0 and ("get", "nodes/proxy") not in counts  # from each kubelet
    # One log read per attempt, the final one: no pod is read while it runs (L31).
    assert run.log_reads["final"] == run.attempts and run.log_reads["doomed"] == 0
    assert sum(run.log_reads.values()) == counts[("get", "pods/log")]
    assert math.isfinite(k8s_api.per_attempt(run)) and k8s_api.per_attempt(run) >= 4
    assert run.meter.steady_indices() and run.meter.profile
    [row] = table_rows(text, "Requests per attempt (every attempt of the mission)")
    assert row[:3] == ["5", str(run.mission.ranges), str(run.attempts)]


def test_dispatcher_cost_smoke(tmp_path):
    results = dispatcher_cost.main(["--smoke", "--out", str(tmp_path)])
    assert [(m.case.path, m.case.supervisor) for m in results] == [
        ("kubernetes", ""),
        ("local", "real"),
        ("local", "standin"),
    ]
    for m in results:
        assert m.all_done and m.leftovers == 0  # no Job left, no supervisor left alive
        assert m.attempts == m.events["submit"] == m.events["finish"] > 0
        assert m.passes and m.run_cpu > 0 and all(p.cpu >= 0 and p.rss > 0 for p in m.passes)
        assert m.high_water >= m.setup_rss > 0
    k8s = results[0]
    assert k8s.extra["polled reads"] == 0 and k8s.extra["final reads"] == k8s.attempts and k8s.extra["summaries"] > 0
    assert k8s.trace is not None and k8s.trace.peak > 0 and k8s.trace.sites and k8s.profile
    text = (tmp_path / "dispatcher_cost.md").read_text()
    assert len(table_rows(text, "CPU of the dispatcher's process")) == 3
    assert len(table_rows(text, "Memory of the dispatcher's process")) == 3


def test_a_case_runs_in_a_fresh_interpreter():
    m = dispatcher_cost.measure_in_fresh_process(
        dispatcher_cost.Case("local", 2, 1.0, "standin", shortest=1, longest=1, poll_seconds=0.2)
    )
    assert m.all_done and m.attempts == 2 and m.leftovers == 0 and m.setup_rss > 0


def test_start_memory_smoke(tmp_path):
    """Issue 26 item 4's breakdown runs: import steps and the start, lean and from bytecode."""
    result = start_memory.main(["--smoke", "--out", str(tmp_path)])
    [steps] = result["steps"].values()
    assert steps["apis"] == 2 and 0 < steps["models"] < 60  # the lean client: BatchV1Api, CoreV1Api
    assert all(rss > 0 for _, rss, _ in steps["steps"])
    [(at_start, at_cap, models)] = result["starts"].values()
    assert 0 < at_start <= at_cap and 0 < models < 767
    text = (tmp_path / "start_memory.md").read_text()
    assert len(table_rows(text, "RSS after each import step (one fresh interpreter per column)")) == len(steps["steps"])


def test_first_pass_smoke(tmp_path):
    rows = first_pass.main(["--smoke", "--out", str(tmp_path)])
    # Issue 26 item 3: serial and pooled, each first pass submitted every slot's attempt.
    assert [(c, submitted) for c, _, submitted in rows] == [(1, 6), (8, 6)]
    [serial, pooled] = table_rows((tmp_path / "first_pass.md").read_text(), "First pass")
    assert serial[0] == "1" and pooled[0] == "8"
