"""Nodes and the scheduler's filter step, for the simulated cluster.

A pod fits a node when the node is Ready and schedulable, its labels hold the
pod's `nodeSelector`, every NoSchedule/NoExecute taint is tolerated, and the
pod's requests fit in what the node's other live pods leave of its
allocatable. A pod that fits nowhere keeps `PodScheduled=False` with reason
`Unschedulable` and a message in the scheduler's own format, which is what
an attempt stuck on a missing tier shows (issue 4, item 6). Among fitting
nodes the one with the most free memory wins (the default LeastAllocated
score, simplified).
"""

from __future__ import annotations

import json
from collections import Counter
from functools import lru_cache

from kubernetes.utils import parse_quantity

from kubesim.kube_meta import set_condition

RESOURCES = ("cpu", "memory", "ephemeral-storage")
DEFAULT_ALLOCATABLE = {"cpu": "16", "memory": "64Gi", "ephemeral-storage": "200Gi", "pods": "110"}
KUBELET_PORT = 10250  # the kubelet's default --port


def node_manifest(
    name: str,
    labels: dict | None,
    taints: list[dict] | None,
    allocatable: dict | None,
    ip: str,
    kubelet_port: int = KUBELET_PORT,
) -> dict:
    alloc = {**DEFAULT_ALLOCATABLE, **(allocatable or {})}
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})},
        },
        "spec": {"taints": list(taints or [])},
        "status": {
            "capacity": dict(alloc),
            "allocatable": dict(alloc),
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                }
            ],
            # Where the node's kubelet is (Kubernetes API reference, NodeStatus): NodeAddress
            # {type, address}, and DaemonEndpoint's port, whose JSON name is "Port".
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": kubelet_port}},
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": name,
                "containerRuntimeVersion": "containerd://1.7.13",
                "kernelVersion": "6.1.0",
                "kubeProxyVersion": "v1.31.0",
                "kubeletVersion": "v1.31.0",
                "machineID": name,
                "operatingSystem": "linux",
                "osImage": "catchup-sim",
                "systemUUID": name,
            },
        },
    }


@lru_cache(maxsize=4096)
def quantity(text: str) -> float:
    return float(parse_quantity(text))


def pod_requests(spec: dict) -> dict[str, float]:
    total = {r: 0.0 for r in RESOURCES}
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        # A limit without a request defaults the request to the limit.
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        for r in RESOURCES:
            if r in merged:
                total[r] += quantity(str(merged[r]))
    return total


def tolerated(taint: dict, tolerations: list[dict]) -> bool:
    for t in tolerations:
        if t.get("effect") and t["effect"] != taint.get("effect"):
            continue
        if t.get("operator") == "Exists":
            if not t.get("key") or t["key"] == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and t.get("value", "") == taint.get("value", ""):
            return True
    return False


class Scheduler:
    """Filter and pick, over one step's view of nodes and their live pods."""

    def __init__(self, nodes: list[dict], pods: list[dict]) -> None:
        self.nodes = []
        for node in nodes:
            spec, status = node.get("spec") or {}, node.get("status") or {}
            alloc = {r: quantity(str(v)) for r, v in (status.get("allocatable") or {}).items()}
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
            taints = [t for t in spec.get("taints") or [] if t.get("effect") in ("NoSchedule", "NoExecute")]
            self.nodes.append(
                (
                    node["metadata"]["name"],
                    node["metadata"].get("labels") or {},
                    bool(spec.get("unschedulable")),
                    ready,
                    taints,
                    alloc,
                )
            )
        self.used = {n[0]: {r: 0.0 for r in (*RESOURCES, "pods")} for n in self.nodes}
        for pod in pods:
            node = pod["spec"].get("nodeName")
            if node in self.used and pod["status"].get("phase") not in ("Succeeded", "Failed"):
                self._add(node, pod_requests(pod["spec"]))
        # Within a step capacity only shrinks: a pod shape that fit nowhere still fits nowhere.
        self._failed: dict[str, str] = {}

    def _add(self, node: str, req: dict[str, float]) -> None:
        for r, v in req.items():
            self.used[node][r] += v
        self.used[node]["pods"] += 1

    def place(self, pod: dict) -> tuple[str | None, str]:
        """(node name, "") or (None, the scheduler's message)."""
        spec = pod["spec"]
        selector = spec.get("nodeSelector") or {}
        tolerations = spec.get("tolerations") or []
        req = pod_requests(spec)
        shape = json.dumps([selector, tolerations, req], sort_keys=True)
        if shape in self._failed:
            return None, self._failed[shape]
        reasons: Counter[str] = Counter()
        fits = []
        for name, labels, cordoned, ready, taints, alloc in self.nodes:
            untolerated = [t for t in taints if not tolerated(t, tolerations)]
            if cordoned:
                reasons["node(s) were unschedulable"] += 1
            elif not ready:
                reasons["node(s) had untolerated taint {node.kubernetes.io/not-ready: }"] += 1
            elif any(labels.get(k) != v for k, v in selector.items()):
                reasons["node(s) didn't match Pod's node affinity/selector"] += 1
            elif untolerated:
                t = untolerated[0]
                reasons[f"node(s) had untolerated taint {{{t['key']}: {t.get('value', '')}}}"] += 1
            else:
                used = self.used[name]
                short = [r for r in RESOURCES if req[r] and r in alloc and used[r] + req[r] > alloc[r]]
                if "pods" in alloc and used["pods"] + 1 > alloc["pods"]:
                    short.append("pods")
                for r in short:
                    reasons[f"Insufficient {r}"] += 1
                if not short:
                    fits.append((used["memory"] - alloc.get("memory", 0.0), name))
        if fits:
            name = min(fits)[1]
            self._add(name, req)
            return name, ""
        if not self.nodes:
            message = "no nodes available to schedule pods"
        else:
            message = unschedulable_message(len(self.nodes), reasons)
        self._failed[shape] = message
        return None, message


def unschedulable_message(total: int, reasons: Counter[str] | dict | str) -> str:
    if isinstance(reasons, str):
        detail = reasons
    else:
        detail = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()))
    return (
        f"0/{total} nodes are available: {detail}. preemption: 0/{total} nodes are "
        f"available: {total} Preemption is not helpful for scheduling."
    )


def schedule_pending(store, now: float) -> None:
    """Bind every unbound pod that fits; mark the rest Unschedulable (once per reason)."""
    pending = [
        p for p in store.select("pods") if not p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    ]
    if not pending:
        return
    sched = Scheduler(store.select("nodes"), store.select("pods"))
    for pod in pending:
        claim_problem = _claim_problem(store, pod)
        node, message = (
            (None, unschedulable_message(len(sched.nodes), claim_problem)) if claim_problem else sched.place(pod)
        )
        if node is None:
            cond = next((c for c in pod["status"].get("conditions") or [] if c["type"] == "PodScheduled"), {})
            if cond.get("message") != message:  # unchanged: no write, as the real one
                set_condition(pod, "PodScheduled", "False", now, "Unschedulable", message)
                store.bump(pod)
                store.event(pod, "FailedScheduling", message, "default-scheduler")
            continue
        pod["spec"]["nodeName"] = node
        set_condition(pod, "PodScheduled", "True", now)
        store.bump(pod)


def _claims(pod: dict) -> list[str]:
    return [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"].get("volumes") or []
        if (v.get("persistentVolumeClaim") or {}).get("claimName")
    ]


def _claim_problem(store, pod: dict) -> str:
    for claim in _claims(pod):
        pvc = store.live("persistentvolumeclaims", pod["metadata"]["namespace"], claim)
        if pvc is None:
            return f'persistentvolumeclaim "{claim}" not found'
        if pvc["metadata"].get("deletionTimestamp"):
            return f'persistentvolumeclaim "{claim}" is being deleted'
    return ""


def bind_claims(store) -> None:
    """WaitForFirstConsumer: a claim binds when a pod using it is scheduled."""
    for pod in store.select("pods"):
        if not pod["spec"].get("nodeName"):
            continue
        for claim in _claims(pod):
            pvc = store.live("persistentvolumeclaims", pod["metadata"]["namespace"], claim)
            if pvc and pvc["status"].get("phase") != "Bound":
                pvc["spec"]["volumeName"] = f"pvc-{pvc['metadata']['uid']}"
                request = (pvc["spec"].get("resources") or {}).get("requests") or {}
                pvc["status"] = {
                    "phase": "Bound",
                    "accessModes": pvc["spec"].get("accessModes", ["ReadWriteOnce"]),
                    "capacity": {"storage": request.get("storage", "1Gi")},
                }
                store.bump(pvc)
