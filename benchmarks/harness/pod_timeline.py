"""When the real control plane made what a first pass asked for, read back from what the API server holds.

Each Job's, pod's and PersistentVolume's `metadata.creationTimestamp` (the API server's clock when it stored
the object), the `PodScheduled` condition's `lastTransitionTime` (kube-scheduler's binding: the scheduler
writes the condition when the binding is made, pkg/scheduler/schedule_one.go), the `Ready` one's (kwok's
pod-ready stage: the pod runs), and when kube-controller-manager last wrote a claim's status (its
`managedFields` entry: the PV controller marking it Bound). All are RFC 3339 timestamps of one second's
resolution (metav1.Time), so a rate is taken over spans of tens of seconds, where a second either way is a
few percent.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

# KEP-2307 (Job tracking without lingering Pods), "Alpha -> Beta Graduation": "Processing 5000 Pods per
# minute across any number of Jobs, with Pod creation having higher priority than status updates."
# kubernetes/enhancements keps/sig-apps/2307-job-tracking-without-lingering-pods/README.md
JOB_CONTROLLER_TARGET_PER_MINUTE = 5000


def _t(stamp: str) -> float:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True)
class Stage:
    """One kind of event of the first pass: how many, over what span, at what rate."""

    what: str
    count: int
    first: float  # seconds after the first Job was stored
    last: float
    peak_minute: int  # most events within any 60 s

    @property
    def per_second(self) -> float:
        """Events per second from the first to the last: (count - 1) intervals over the span."""
        span = self.last - self.first
        return (self.count - 1) / span if span > 0 else float("nan")

    @property
    def per_minute(self) -> float:
        return 60 * self.per_second


def stage(what: str, stamps: list[float], origin: float) -> Stage:
    times = sorted(t - origin for t in stamps)
    if not times:
        return Stage(what, 0, float("nan"), float("nan"), 0)
    peak, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] >= 60:
            lo += 1
        peak = max(peak, hi - lo + 1)
    return Stage(what, len(times), times[0], times[-1], peak)


def _condition(pod: dict, kind: str) -> float | None:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c["type"] == kind and c["status"] == "True":
            return _t(c["lastTransitionTime"])
    return None


def _claim_bound(claim: dict) -> float | None:
    """When kube-controller-manager last wrote the claim's status: the PV controller's Bound."""
    if (claim.get("status") or {}).get("phase") != "Bound":
        return None
    for entry in claim["metadata"].get("managedFields") or []:
        if entry.get("manager") == "kube-controller-manager" and entry.get("subresource") == "status":
            return _t(entry["time"])
    return None


def first_pass_timeline(core, batch, namespace: str) -> list[Stage]:
    """Jobs stored, pods stored (the Job controller), volumes made (the virtual provisioner), claims bound (the
    PV controller), pods bound (the scheduler, once a pod's claim is bound), pods running (kwok)."""

    def items(listing) -> list[dict]:
        return json.loads(listing.data)["items"]

    jobs = items(batch.list_namespaced_job(namespace, _preload_content=False))
    pods = items(core.list_namespaced_pod(namespace, _preload_content=False))
    claims = items(core.list_namespaced_persistent_volume_claim(namespace, _preload_content=False))
    volumes = [
        v
        for v in items(core.list_persistent_volume(_preload_content=False))
        if (v["spec"].get("claimRef") or {}).get("namespace") == namespace
    ]
    job_times = [_t(j["metadata"]["creationTimestamp"]) for j in jobs]
    origin = min(job_times) if job_times else 0.0
    made = [_t(v["metadata"]["creationTimestamp"]) for v in volumes]
    return [
        stage("Jobs stored (the dispatcher's creates)", job_times, origin),
        stage(
            "pods stored (the Job controller's creates)", [_t(p["metadata"]["creationTimestamp"]) for p in pods], origin
        ),
        stage("volumes made (the virtual provisioner)", made, origin),
        stage("claims bound (the PV controller)", [t for c in claims if (t := _claim_bound(c)) is not None], origin),
        stage(
            "pods bound (kube-scheduler)", [t for p in pods if (t := _condition(p, "PodScheduled")) is not None], origin
        ),
        stage("pods running (kwok)", [t for p in pods if (t := _condition(p, "Ready")) is not None], origin),
    ]


def pods_phases(core, namespace: str) -> dict[str, int]:
    pods = json.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)["items"]
    phases: dict[str, int] = {}
    for p in pods:
        phase = (p.get("status") or {}).get("phase", "?")
        if phase == "Pending" and _condition(p, "PodScheduled") is not None:
            phase = "Pending, bound"
        phases[phase] = phases.get(phase, 0) + 1
    return phases
