"""The real control plane in a benchmark: tests/kit's ControlPlane, with an audit log of the dispatcher's requests,
an identity of the dispatcher's own, kwok nodes, and the RSS and CPU of each of its processes.

Issue 34 item 7 ("measured against the real thing"): kube-apiserver, etcd, kube-controller-manager,
kube-scheduler and kwok as tools/k8s/build.sh builds them (v1.37), started by the same harness the k8s
test tier uses, so the benchmark and the tests run one control plane, configured once.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from benchmarks.harness.sim_cluster import POD_CPU, POD_MEMORY, TIER, TIER_LABEL, TIER_TAINT

ROOT = Path(__file__).resolve().parents[2]
NAMESPACE = "catchup"
DISPATCHER_SA = "cu-dispatcher"
DISPATCHER_USER = f"system:serviceaccount:{NAMESPACE}:{DISPATCHER_SA}"
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def kit():
    """tests/kit's control plane module. Benchmarks run from the repository root, where tests/ is not on
    sys.path (pytest adds it from pyproject's `pythonpath`); appended, not inserted, so it shadows nothing.
    One harness for the tests and the benchmarks, rather than a copy that drifts from it."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.append(tests)
    import kit.control_plane as control_plane

    return control_plane


def bin_dir_with_running_jobs(src: Path, dst: Path) -> Path:
    """The binaries of `src`, with kwok's default Stages less `pod-complete`.

    kwok's default moves a Job's pod from Running to Succeeded at once (kustomize/stage/pod/fast); a range
    runs for hours, so here a pod stays Running until it is deleted, as the dispatcher's Job would."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in kit().BINARIES:
        link = dst / name
        if not link.exists():
            link.symlink_to(src / name)
    docs = (src / "kwok-stages.yaml").read_text().split("\n---\n")
    kept = [d for d in docs if "\n  name: pod-complete\n" not in d]
    if len(kept) != len(docs) - 1:
        raise RuntimeError(f"{src / 'kwok-stages.yaml'}: no single pod-complete stage to leave out")
    (dst / "kwok-stages.yaml").write_text("\n---\n".join(kept))
    return dst


def audit_policy(path: Path) -> Path:
    """kube-apiserver's audit policy: one event per request the dispatcher makes (when its answer is complete),
    none for anyone else. Metadata only: who, verb, resource, the answer's code (audit.k8s.io/v1 Policy)."""
    policy = {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Policy",
        "omitStages": ["RequestReceived", "ResponseStarted"],
        "rules": [{"level": "Metadata", "users": [DISPATCHER_USER]}, {"level": "None"}],
    }
    path.write_text(json.dumps(policy))  # JSON is YAML
    return path


def audit_counts(path: Path, user: str = DISPATCHER_USER) -> tuple[Counter, Counter]:
    """((verb, resource[/subresource]) -> requests, answer code -> requests) of `user`, from the audit log."""
    requests, codes = Counter(), Counter()
    if not path.exists():
        return requests, codes
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event.get("user", {}).get("username") != user or event.get("stage") not in ("ResponseComplete", "Panic"):
            continue
        ref = event.get("objectRef") or {}
        resource = ref.get("resource") or event.get("requestURI", "?")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        requests[(event["verb"], resource)] += 1
        codes[(event.get("responseStatus") or {}).get("code", 0)] += 1
    return requests, codes


@dataclass
class Plane:
    """A running control plane as a benchmark sees it."""

    control: object  # kit.control_plane.ControlPlane
    audit_log: Path
    token_file: Path  # the dispatcher's ServiceAccount token, from the real TokenRequest API

    @property
    def pids(self) -> dict[str, int]:
        return self.control.pids

    def requests(self) -> tuple[Counter, Counter]:
        return audit_counts(self.audit_log)


@contextmanager
def real_plane(work: Path, extra_args: dict[str, list[str]] | None = None):
    """A fresh control plane (stopped on exit: every process, every port), the mission namespace in it and
    the dispatcher's account, allowed everything: its identity only sets its requests apart in the audit log
    (the chart's Role is the k8s tier's concern, tests/k8s/test_chart_real_plane.py)."""
    cp = kit()
    bins = bin_dir_with_running_jobs(cp.bin_dir(), work / "bin")
    audit = work / "audit.log"
    args = {k: list(v) for k, v in (extra_args or {}).items()}
    args.setdefault("kube-apiserver", []).extend(
        [f"--audit-policy-file={audit_policy(work / 'audit-policy.yaml')}", f"--audit-log-path={audit}"]
    )
    with cp.ControlPlane(bins, extra_args=args) as control:
        control.create_namespace(NAMESPACE)
        token = work / "dispatcher-token"
        token.write_text(_dispatcher_token(control))
        yield Plane(control, audit, token)


def _dispatcher_token(control) -> str:
    import kubernetes.client as k8s

    with control.api_client() as admin:
        core, rbac = k8s.CoreV1Api(admin), k8s.RbacAuthorizationV1Api(admin)
        core.create_namespaced_service_account(NAMESPACE, {"metadata": {"name": DISPATCHER_SA}})
        subject = {"kind": "ServiceAccount", "name": DISPATCHER_SA, "namespace": NAMESPACE}
        ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"}
        body = {"metadata": {"name": DISPATCHER_SA}, "subjects": [subject], "roleRef": ref}
        rbac.create_cluster_role_binding(body)
        spec = {"spec": {"expirationSeconds": 6 * 3600}}
        return core.create_namespaced_service_account_token(DISPATCHER_SA, NAMESPACE, spec).status.token


def node_allocatable(pods_per_node: int) -> dict[str, str]:
    """What a node offers: `pods_per_node` of the mission's pods (nebula: 12 GiB, 4 CPU), as on kubesim."""
    n = pods_per_node
    return {
        "memory": str((n + 1) * POD_MEMORY),
        "cpu": str((n + 1) * POD_CPU),
        "pods": str(n + 10),
        "ephemeral-storage": f"{(n + 1) * 100}Gi",
    }


def kwok_nodes(control, count: int, pods_per_node: int, deadline: float = 120.0) -> list[str]:
    """`count` nebula nodes run by kwok (annotated as its own), labelled and tainted as the tier's pool;
    returned once kwok has made each Ready."""
    import kubernetes.client as k8s

    names = [f"kwok-{TIER}-{i}" for i in range(count)]
    with control.api_client() as admin:
        core = k8s.CoreV1Api(admin)
        for name in names:
            body = {
                "metadata": {"name": name, "annotations": {kit().KWOK_NODE: "fake"}, "labels": {TIER_LABEL: TIER}},
                "spec": {"taints": [{"key": TIER_TAINT, "value": TIER, "effect": "NoSchedule"}]},
            }
            core.create_node(body)
            status = {"allocatable": node_allocatable(pods_per_node), "capacity": node_allocatable(pods_per_node)}
            core.patch_node_status(name, {"status": status})
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            nodes = json.loads(core.list_node(_preload_content=False).data)["items"]
            ready = {
                n["metadata"]["name"]
                for n in nodes
                if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"].get("conditions") or [])
            }
            if ready >= set(names):
                return names
            time.sleep(0.5)
    raise TimeoutError(f"kwok made {len(ready & set(names))} of {count} nodes Ready in {deadline:.0f} s")


@dataclass
class ProcessMeter:
    """RSS and CPU of named processes, sampled on a thread: the most RSS each reached, and its CPU seconds."""

    pids: dict[str, int]
    every: float = 1.0
    peak: dict[str, int] = field(default_factory=dict)
    load: list[tuple[float, float, float]] = field(default_factory=list)  # os.getloadavg() at each sample

    def __post_init__(self) -> None:
        self._procs = {name: psutil.Process(pid) for name, pid in self.pids.items()}
        self._last_cpu: dict[str, float] = {}
        self._cpu0 = self.cpu()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="process-meter", daemon=True)

    def __enter__(self) -> ProcessMeter:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def rss(self) -> dict[str, int]:
        out = {}
        for name, proc in self._procs.items():
            try:
                out[name] = proc.memory_info().rss
            except psutil.NoSuchProcess:
                out[name] = 0
        return out

    def cpu(self) -> dict[str, float]:
        """CPU seconds of each so far; of one that has exited, what it had at its last sample."""
        for name, proc in self._procs.items():
            try:
                t = proc.cpu_times()
                self._last_cpu[name] = t.user + t.system
            except psutil.NoSuchProcess:
                pass
        return {name: self._last_cpu.get(name, 0.0) for name in self._procs}

    def cpu_since_start(self) -> dict[str, float]:
        now = self.cpu()
        return {name: now[name] - self._cpu0.get(name, 0.0) for name in now}

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            for name, rss in self.rss().items():
                self.peak[name] = max(self.peak.get(name, 0), rss)
            self.cpu()
            self.load.append(os.getloadavg())
