"""What one Job and its pod say about an attempt, as an AttemptState (L4, L23).

Pure over `kubernetes.client` models: the backend LISTs the mission's Jobs and
pods once per pass and hands each pair here. Nothing is fetched per attempt.
Also what the pods say beside it: one that cannot start, one about to go, and
the peaks of the running ones in a kubelet summary (L19).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime

from catchup_assets.backends.kubernetes.identity import KEPT, creator, pod_owner, spec_digest, worker_digest
from catchup_assets.backends.kubernetes.names import CONTAINER, LABEL_ATTEMPT, LABEL_RANGE_KEY, LABEL_TIER
from catchup_assets.core.classify.outcomes import Observation
from catchup_assets.core.dispatch.ports import AttemptState, Peaks, Phase

# A pod that waits for one of these will never start: the mission's config is wrong.
CONFIG_ERRORS = frozenset({"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "CreateContainerConfigError"})
_EXIT_IN_MESSAGE = re.compile(r"exit code (\d+)", re.ASCII)


@dataclass(frozen=True)
class Waiting:
    """Why a pod has not started, and since when (epoch seconds)."""

    reason: str
    message: str
    since: float | None
    config_error: bool


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None


def _true_conditions(conditions: Iterable | None) -> list:
    return [c for c in conditions or () if (c.status or "") == "True"]


def _container_status(pod):
    statuses = (pod.status.container_statuses or []) if pod is not None and pod.status else []
    for cs in statuses:
        if cs.name == CONTAINER:
            return cs
    return statuses[0] if statuses else None


def job_finished(job) -> tuple[bool, list]:
    conds = [
        c for c in _true_conditions(job.status.conditions if job.status else None) if c.type in ("Complete", "Failed")
    ]
    return bool(conds), conds


def pod_terminal(pod) -> bool:
    return pod is not None and pod.status is not None and pod.status.phase in ("Succeeded", "Failed")


def waiting(pod) -> Waiting | None:
    """A pending pod's reason for not running: unschedulable, or a container that cannot start."""
    if pod is None or pod.status is None or pod.status.phase != "Pending":
        return None
    for c in pod.status.conditions or ():
        if c.type == "PodScheduled" and c.status == "False" and c.reason == "Unschedulable":
            return Waiting("Unschedulable", c.message or "", _ts(c.last_transition_time), False)
    cs = _container_status(pod)
    if cs is not None and cs.state is not None and cs.state.waiting is not None:
        w = cs.state.waiting
        created = _ts(pod.metadata.creation_timestamp) if pod.metadata else None
        return Waiting(w.reason or "", w.message or "", created, (w.reason or "") in CONFIG_ERRORS)
    return None


def observation(job, pod) -> Observation:
    """Evidence of a finished attempt from whatever is left of its Job and pod."""
    _, conds = job_finished(job)
    reasons = {c.reason for c in conds if c.reason}
    messages = [c.message for c in conds if c.message]
    exit_code = termination = pod_reason = None
    message = ""
    if pod is not None and pod.status is not None:
        disruption = ""
        for c in _true_conditions(pod.status.conditions):
            if c.type == "DisruptionTarget":
                # Its reason says who: TerminationByKubelet, EvictionByEvictionAPI, ...
                reasons |= {c.type, c.reason} - {None}
                disruption = c.message or ""
        pod_reason = pod.status.reason
        message = pod.status.message or ""
        cs = _container_status(pod)
        term = cs.state.terminated if cs is not None and cs.state is not None else None
        if term is not None:
            exit_code, termination = term.exit_code, term.reason
            message = message or term.message or ""
        message = message or disruption
    if any(c.type == "Complete" for c in conds) and exit_code is None:
        exit_code = 0
    # A pod failure policy names the evidence of a pod already gone (spot reclaims
    # delete the node first): the DisruptionTarget condition, or the exit code.
    for m in messages:
        if "DisruptionTarget" in m:
            reasons.add("DisruptionTarget")
        found = _EXIT_IN_MESSAGE.search(m)
        if found and exit_code is None:
            exit_code = int(found.group(1))
    return Observation(
        exit_code=exit_code,
        termination_reason=termination,
        pod_reason=pod_reason,
        conditions=frozenset(reasons),
        message=message or "; ".join(messages),
        node_gone=pod is None and not conds,
    )


def attempt_state(job, pod, peaks: Peaks = Peaks()) -> AttemptState:
    """The attempt as this pass sees it. Pending/running ones carry no observation."""
    labels = job.metadata.labels or {}
    finished, _ = job_finished(job)
    cs = _container_status(pod)
    term = cs.state.terminated if cs is not None and cs.state is not None else None
    running = cs.state.running if cs is not None and cs.state is not None else None
    # The attempt's own clock (L23): container start and finish; nothing if the pod is gone.
    started = _ts(term.started_at if term else running.started_at if running else None)
    finished_at = _ts(term.finished_at) if term else None
    if finished or pod_terminal(pod):
        phase, obs = Phase.FINISHED, observation(job, pod)
    elif pod is not None and pod.status is not None and pod.status.phase == "Running":
        phase, obs = Phase.RUNNING, None
    else:
        phase, obs = Phase.PENDING, None
    resources = None
    if job.spec and job.spec.template and job.spec.template.spec:
        for c in job.spec.template.spec.containers or ():
            if c.name == CONTAINER and c.resources and c.resources.limits:
                resources = c.resources.limits.get("memory")
    return AttemptState(
        range_key=labels.get(LABEL_RANGE_KEY, ""),
        attempt=int(labels.get(LABEL_ATTEMPT, "0") or 0),
        phase=phase,
        observation=obs,
        started_at=started,
        finished_at=finished_at,
        node=pod.spec.node_name if pod is not None and pod.spec is not None else None,
        peaks=peaks,
        memory_limit_bytes=parse_quantity_bytes(resources) if resources else None,
        tier=labels.get(LABEL_TIER) or _template_node_selector(job).get(LABEL_TIER),
    )


def _template_node_selector(job) -> dict:
    spec = job.spec.template.spec if job.spec and job.spec.template else None
    return (spec.node_selector or {}) if spec is not None else {}


_SUFFIX = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "k": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4}


def parse_quantity_bytes(q: str) -> int:
    """A memory quantity (`123Mi`, `1Gi`, `1073741824`) in bytes."""
    q = str(q).strip()
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if q.endswith(suffix):
            return int(float(q[: -len(suffix)]) * _SUFFIX[suffix])
    return int(float(q))


def never_starting(
    pod, now: float, config_error_seconds: float, unschedulable_seconds: float
) -> tuple[Waiting, Observation] | None:
    """Why a pod will not start, once it has waited past its cause's limit; None while it may still start."""
    w = waiting(pod)
    if w is None or w.since is None:
        return None
    limit = config_error_seconds if w.config_error else unschedulable_seconds if w.reason == "Unschedulable" else None
    if limit is None or now - w.since < limit:
        return None
    cause = f"{w.reason}: {w.message}".strip(": ")
    return w, Observation(pod_reason=w.reason if w.reason == "Unschedulable" else "FailedCreate", message=cause)


def doomed(pod) -> bool:
    """A pod about to go (reclaim notice, deletion): read its log now, while it is there (L31).

    Its volume keeps the log anyway, but only a read now gets it into this attempt's record
    (its exit report, L24): the next attempt's copy arrives after the record is written.
    """
    if pod.metadata.deletion_timestamp is not None:
        return True
    return any(c.type == "DisruptionTarget" and c.status == "True" for c in (pod.status.conditions or ()))


def running_by_node(pods: Iterable) -> dict[str, dict[str, str]]:
    """Node -> pod name -> attempt id, of the running pods: the nodes whose kubelet summary to read (L19)."""
    ours: dict[str, dict[str, str]] = {}
    for pod in pods:
        if pod.status and pod.status.phase == "Running" and pod.spec.node_name:
            labels = pod.metadata.labels or {}
            aid = f"{labels.get(LABEL_RANGE_KEY)}-a{int(labels.get(LABEL_ATTEMPT, '0')):03d}"
            ours.setdefault(pod.spec.node_name, {})[pod.metadata.name] = aid
    return ours


def summary_peaks(summary: dict, names: dict[str, str]) -> Iterator[tuple[str, Peaks]]:
    """(attempt id, sample) per pod of ours in one kubelet summary; `names` maps its pod names to attempts."""
    for p in summary.get("pods", []):
        aid = names.get(p.get("podRef", {}).get("name"))
        if aid is None:
            continue
        c = next((c for c in p.get("containers", []) if c.get("name") == CONTAINER), {})
        mem = c.get("memory", {})
        yield (
            aid,
            Peaks(mem.get("rssBytes"), mem.get("workingSetBytes"), (p.get("ephemeral-storage") or {}).get("usedBytes")),
        )


# What of each object the informers cache (issue 26 item 4): every field this module and the
# backend read, and none of the rest (a Job's pod template, a pod's containers, volumes, env).
# Metadata and status stay whole. 2000 Jobs and pods are held between passes.
# The digests of what is dropped are kept (identity.py): whose the object is is checked on the cached copy.
def kept_job(job: dict) -> dict:
    spec = ((job.get("spec") or {}).get("template") or {}).get("spec") or {}
    job[KEPT] = {"spec": spec_digest(spec), "worker": worker_digest(spec), "creator": creator(job)}
    containers = [{"name": c.get("name"), "resources": c.get("resources")} for c in spec.get("containers") or ()]
    job["spec"] = {"template": {"spec": {"containers": containers, "nodeSelector": spec.get("nodeSelector")}}}
    return job


def kept_pod(pod: dict) -> dict:
    pod[KEPT] = {"worker": worker_digest(pod.get("spec")), "creator": creator(pod)}
    pod["spec"] = {"nodeName": (pod.get("spec") or {}).get("nodeName")}
    return pod


def owned_pods(pods: dict[str, dict], jobs: dict[str, dict]) -> dict[str, tuple[str, dict]]:
    """Pod name -> (its Job's name, the pod), of the pods owned by one of `jobs` (ours: identity.pod_owner).
    A pod that only carries our labels, or names our Job as owner and runs something else, is no attempt's."""
    by_uid = {j["metadata"].get("uid"): j for j in jobs.values() if j["metadata"].get("uid")}
    owned = {}
    for name, pod in pods.items():
        owner = pod_owner(pod, by_uid)
        if owner is not None:
            owned[name] = (owner, pod)
    return owned


def newest_pods(owned: dict[str, tuple[str, dict]]) -> dict[str, dict]:
    """Job name -> its newest pod (a Job's replacement pod supersedes the one it replaced)."""
    newest: dict[str, dict] = {}
    for owner, pod in owned.values():
        known = newest.get(owner)
        if known is None or _created(pod) > _created(known):
            newest[owner] = pod
    return newest


def resource_version(obj: dict | None) -> str | None:
    return obj["metadata"].get("resourceVersion") if obj is not None else None


def _created(pod: dict) -> str:
    return pod["metadata"].get("creationTimestamp") or ""  # RFC 3339 in UTC: ordered as text
