"""The runs `k8s_real` compares: one mission on kubesim, and the same mission on the real control plane with
virtual kubelets (logs and memory read as in production) or with kwok nodes (pods bound and running, at the
scale kwok's Go takes cheaply, for the first pass); each with what the cluster's processes used meanwhile."""

from __future__ import annotations

import os
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from benchmarks.harness.plane_mission import MissionProcess, MissionRun, RealTarget, Shape
from benchmarks.harness.pod_timeline import Stage, first_pass_timeline
from benchmarks.harness.real_cloud import Cloud, CloudReport, CloudSpec
from benchmarks.harness.real_plane import NAMESPACE, ProcessMeter, kwok_nodes, real_plane

ALL_RUNNING_WITHIN = 1800.0  # seconds a kwok run waits for every slot's pod to run before it gives up
HOLD = 15.0  # seconds a kwok run goes on at 2000 running, its processes' RSS sampled meanwhile


@dataclass
class ClusterRun:
    """A mission and what the cluster under it held and used."""

    label: str
    mission: MissionRun
    requests: Counter  # (verb, resource) -> requests: the API server's, and the kubelets' summaries
    codes: Counter = field(default_factory=Counter)  # the API server's answers to the dispatcher, by code
    rss_all_running: dict[str, int] = field(default_factory=dict)  # per process, when every slot's pod ran
    rss_peak: dict[str, int] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)  # per process, CPU seconds over the run
    load: list[tuple[float, float, float]] = field(default_factory=list)  # os.getloadavg() every second
    cloud: CloudReport | None = None
    timeline: list[Stage] = field(default_factory=list)
    args: dict[str, list[str]] = field(default_factory=dict)  # the control plane's extra flags

    @property
    def load_range(self) -> tuple[float, float]:
        ones = [one for one, _, _ in self.load] or [os.getloadavg()[0]]
        return min(ones), max(ones)


def nodes_for(shape: Shape) -> int:
    """Enough nodes for every slot's pod, with one to spare (sim_cluster.ClusterSpec.for_parallelism)."""
    return -(-shape.in_flight // shape.pods_per_node) + 1


def run_kubesim(shape: Shape, label: str) -> ClusterRun:
    """The mission on kubesim; its cluster (API server and kubelets, one process) is the mission's child."""
    mission = MissionProcess("kubesim", shape).start()
    meter = None
    while mission.result is None:
        mission.poll(1.0)
        if meter is None:
            kids = psutil.Process(mission.pid).children() if mission.result is None else []
            if kids:
                meter = ProcessMeter({"kubesim (API server and kubelets)": kids[0].pid}).__enter__()
    if meter is not None:
        meter.__exit__(None, None, None)
    run = mission.result
    reads = Counter(run.log_reads)
    reads["final"] = run.requests.get(("get", "pods/log"), 0) - reads["doomed"]
    run.log_reads = reads
    return ClusterRun(
        label,
        run,
        Counter(run.requests),
        rss_peak=dict(meter.peak) if meter else {},
        cpu=meter.cpu_since_start() if meter else {},
        load=meter.load if meter else [],
    )


def run_real(shape: Shape, label: str, kwok: bool, extra_args: dict[str, list[str]] | None = None) -> ClusterRun:
    """The mission on a fresh control plane. Virtual kubelets run it to its end; on kwok nodes (whose pods run
    until deleted) it runs until every slot's pod has run for HOLD seconds."""
    with tempfile.TemporaryDirectory(prefix="k8s-real-") as tmp, real_plane(Path(tmp), extra_args) as plane:
        c = plane.control
        nodes = 0 if kwok else nodes_for(shape)
        spec = CloudSpec(str(c.kubeconfig), str(c.ca_file), nodes, shape.pods_per_node, shape.attempts)
        with Cloud(spec) as cloud:
            if kwok:
                kwok_nodes(c, nodes_for(shape), shape.pods_per_node)
                # kwok serves no kubelet summary: none is asked for (the first pass reads none anyway).
                shape = Shape(**{**shape.__dict__, "stats_interval": 1e12})
                kubelet = (str(c.ca_file), str(plane.token_file))
            else:
                kubelet = cloud.kubelet_access
            target = RealTarget(c.server, str(c.ca_file), str(plane.token_file), *kubelet)
            with ProcessMeter({**plane.pids, "virtual cloud (provisioner, kubelets)": cloud.pid}) as meter:
                mission = MissionProcess("real", shape, target, until_stopped=kwok).start()
                rss_all, deadline, stopping = {}, time.monotonic() + ALL_RUNNING_WITHIN, False
                while mission.result is None:
                    message = mission.poll(1.0)
                    if message and message[0] == "all running":
                        rss_all = meter.rss()
                        deadline = min(deadline, time.monotonic() + HOLD)
                    if kwok and time.monotonic() > deadline and not stopping:
                        if rss_all:  # after HOLD s with every slot's pod running
                            rss_all = meter.rss()
                        mission.stop()
                        stopping = True
                report = cloud.report()
                cpu = meter.cpu_since_start()
            timeline = first_pass_timeline(*_apis(c), NAMESPACE) if kwok else []
        run = mission.result
        requests, codes = plane.requests()
        requests[("get", "nodes/stats")] = report.stats_reads  # read from each kubelet, not the API server
        reads = Counter(run.log_reads)
        reads["final"] = requests.get(("get", "pods/log"), 0) - reads["doomed"]
        run.log_reads = reads
        return ClusterRun(
            label, run, requests, codes, rss_all, dict(meter.peak), cpu, meter.load, report, timeline, extra_args or {}
        )


def _apis(control):
    import kubernetes.client as k8s

    api = control.api_client()
    return k8s.CoreV1Api(api), k8s.BatchV1Api(api)
