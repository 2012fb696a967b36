"""What the simulated kubelet writes into a pod's status, and when a started container ends.

Statuses follow Kubernetes 1.31: the pod admitted (start time, IPs,
conditions); container statuses with their ids and restart counts; a running
container's end as its script planned it (an exit, an OOM kill with exit 137,
an eviction in the kubelet's own words, a disruption); an exit restarted in
place or ending the pod (a container never started is lost as
ContainerStatusUnknown). `Run` is the kubelet's private state for one pod;
the kubelet (kubelet.py) decides when each of these happens.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubernetes.utils import parse_quantity

from catchup_assets.core.classify import evictions
from catchup_assets.core.units import GiB, MiB
from kubesim.kube_meta import rfc3339
from kubesim.kube_meta import set_condition as _condition
from kubesim.kube_pod import ephemeral_limit
from kubesim.kube_script import DISRUPTION_MESSAGES, Script, first_crossing, usage_at
from kubesim.kube_store import Store
from kubesim.kube_volumes import LogTarget


@dataclass
class Run:
    """The kubelet's private state for one pod."""

    script: Script
    stage: str = "new"  # new, creating, blocked, running, backoff, done
    t_admit: float = 0.0
    t_ready: float = 0.0
    t_start: float = 0.0
    t_end: float = 0.0
    end_kind: str = "exit"  # exit, oom, evict, disrupt
    instance: int = 0
    lines: list = field(default_factory=list)
    next_line: int = 0
    restart_at: float = 0.0
    # A termination under way: (exit time, exit code, remove the pod, drop the node)
    pending: tuple[float, int, bool, bool] | None = None
    log_file: LogTarget | None = None  # the worker's log on its data volume (kube_volumes.py)


def admit(store: Store, pod: dict, run: Run, now: float, pod_ip: str) -> None:
    """The pod admitted on its node: its start time, IPs and conditions, ContainerCreating until it is ready."""
    node = store.live("nodes", None, pod["spec"]["nodeName"])
    run.stage, run.t_admit, run.t_ready = "creating", now, now + run.script.start_delay
    st = pod["status"]
    st["startTime"] = rfc3339(now)
    st["hostIP"] = node["status"]["addresses"][0]["address"] if node else "10.0.0.1"
    st["hostIPs"] = [{"ip": st["hostIP"]}]
    st["podIP"] = pod_ip
    st["podIPs"] = [{"ip": st["podIP"]}]
    for kind, status in (
        ("PodReadyToStartContainers", "True"),
        ("Initialized", "True"),
        ("Ready", "False"),
        ("ContainersReady", "False"),
    ):
        reason = "ContainersNotReady" if status == "False" else None
        names = " ".join(c["name"] for c in pod["spec"]["containers"])
        _condition(pod, kind, status, now, reason, f"containers with unready status: [{names}]" if reason else None)
    set_containers(store, pod, run, {"waiting": {"reason": "ContainerCreating"}})


def planned_end(pod: dict, s: Script, t: float) -> tuple[float, str]:
    """When and how a container started at `t` ends: its script's end, or the first crossing of its
    memory or ephemeral-storage limit if that comes sooner."""
    t_end, end_kind = (
        t + s.duration,
        (
            "oom"
            if s.oom
            else "evict"
            if s.evict_ephemeral or s.evict_memory_pressure
            else "disrupt"
            if s.disrupt
            else "exit"
        ),
    )
    container = pod["spec"]["containers"][0]
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if limit is not None:
        hit = first_crossing(s.curve(), "rss", float(parse_quantity(limit)), s.duration)
        if hit is not None and t + hit < t_end:
            t_end, end_kind = t + hit, "oom"
    eph = ephemeral_limit(pod)
    if eph is not None:
        hit = first_crossing(s.curve(), "ephemeral", float(parse_quantity(eph)), s.duration)
        if hit is not None and t + hit < t_end:
            t_end, end_kind = t + hit, "evict"
    return t_end, end_kind


def exit_container(
    store: Store, pod: dict, run: Run, t: float, code: int, reason: str, force_phase: str | None = None
) -> None:
    """The container exits: restarted in place (the pod stays Running), or the pod ends."""
    ran = run.stage in ("running", "done") or run.instance > 0
    if run.stage == "running":
        term = {
            "exitCode": code,
            "reason": reason,
            "startedAt": rfc3339(run.t_start),
            "finishedAt": rfc3339(t),
            "containerID": container_id(pod, run),
        }
    else:
        # Never started: the status manager reports it as lost, like the real one.
        term = {
            "exitCode": 137,
            "reason": "ContainerStatusUnknown",
            "message": "The container could not be located when the pod was terminated",
        }
    policy = pod["spec"].get("restartPolicy", "Always")
    restart = force_phase is None and (policy == "Always" or (policy == "OnFailure" and code))
    if restart:
        # In place: the pod stays Running and only restartCount tells (the L1 trap).
        run.stage = "backoff"
        run.restart_at = t + min(300.0, 10.0 * 2**run.instance)
        set_containers(
            store,
            pod,
            run,
            {
                "waiting": {
                    "reason": "CrashLoopBackOff",
                    "message": f"back-off {int(run.restart_at - t)}s "
                    f"restarting failed container={pod['spec']['containers'][0]['name']} "
                    f"pod={pod['metadata']['name']}_{pod['metadata']['namespace']}"
                    f"({pod['metadata']['uid']})",
                }
            },
            last={"terminated": term},
        )
        return
    run.stage = "done"
    pod["status"]["phase"] = force_phase or ("Succeeded" if code == 0 else "Failed")
    for kind in ("Ready", "ContainersReady"):
        _condition(pod, kind, "False", t, "PodCompleted")
    _condition(pod, "PodReadyToStartContainers", "False", t)
    set_containers(store, pod, run, {"terminated": term}, keep_id=ran)


def end_container(store: Store, pod: dict, run: Run, t: float) -> None:
    """A running container's end as its script planned it (`run.end_kind`): an exit, an OOM kill, an eviction
    in the kubelet's words, or a disruption (its termination then under way: `run.pending`)."""
    s = run.script
    if run.end_kind == "oom":
        exit_container(store, pod, run, t, 137, "OOMKilled")
    elif run.end_kind == "evict":
        message = eviction_message(pod, run, t)
        if not message.startswith("Pod ephemeral"):
            # Node pressure: the kubelet marks it a disruption (eviction_manager.go
            # synchronize); over its own limit it does not (podEphemeralStorageLimitEviction).
            _condition(pod, "DisruptionTarget", "True", t, "TerminationByKubelet", message)
        pod["status"].update(reason=evictions.REASON, message=message)
        exit_container(store, pod, run, t, 137, "Error", force_phase="Failed")
        store.event(pod, evictions.REASON, message, "kubelet")
    elif run.end_kind == "disrupt":
        _condition(pod, "DisruptionTarget", "True", t, s.disrupt, DISRUPTION_MESSAGES[s.disrupt])
        if s.disrupt == "TerminationByKubelet" and s.disrupt_mode == "exit":
            pod["status"].update(reason="Terminated", message=DISRUPTION_MESSAGES[s.disrupt])
        if s.disrupt_mode == "delete":
            pod["metadata"]["deletionTimestamp"] = rfc3339(t)
            pod["metadata"]["deletionGracePeriodSeconds"] = int(s.grace)
        run.pending = (t + s.grace, s.disrupt_exit_code, s.disrupt_mode == "delete", s.disrupt_mode == "node_gone")
        store.bump(pod)
    else:
        exit_container(store, pod, run, t, s.exit_code, "Completed" if s.exit_code == 0 else "Error")


def set_containers(
    store: Store, pod: dict, run: Run, state: dict, ready: bool = False, last: dict | None = None, keep_id: bool = True
) -> None:
    old = {c["name"]: c for c in pod["status"].get("containerStatuses") or []}
    statuses = []
    for c in pod["spec"]["containers"]:
        prev = old.get(c["name"], {})
        started = "running" in state or "terminated" in state and keep_id
        status = {
            "name": c["name"],
            "image": c["image"],
            "imageID": prev.get("imageID", ""),
            "ready": ready,
            "restartCount": run.instance,
            "started": "running" in state,
            "state": state,
            "lastState": last if last is not None else prev.get("lastState", {}),
        }
        if started:
            status["imageID"] = f"{c['image'].split(':')[0]}@sha256:{'0' * 64}"
            status["containerID"] = container_id(pod, run)
        statuses.append(status)
    pod["status"]["containerStatuses"] = statuses
    store.bump(pod)


def container_id(pod: dict, run: Run) -> str:
    return f"containerd://{pod['metadata']['uid'].replace('-', '')}{run.instance:08x}"


def eviction_message(pod: dict, run: Run, t: float) -> str:
    """The kubelet's words (pkg/kubelet/eviction/helpers.go) for why this pod goes."""
    s = run.script
    container = pod["spec"]["containers"][0]
    requests = (container.get("resources") or {}).get("requests") or {}
    use = usage_at(s.curve(), t - run.t_start)
    if s.evict_memory_pressure:
        request = int(parse_quantity(requests.get("memory", "0")))
        over = container["name"] if use.working_set > request else None
        return evictions.node_pressure_message("memory", 100 * MiB, 91 * MiB, over, use.working_set, request)
    limit = ephemeral_limit(pod)
    if limit is not None:
        return evictions.POD_EPHEMERAL_FMT.format(limit=evictions.quantity(int(parse_quantity(limit))))
    # No limit of its own (a pooled pod has its node to itself, L15): it fills the
    # node's disk, and the node, short of disk, evicts the pod using the most over its request.
    request = int(parse_quantity(requests.get(evictions.DISK, "0")))
    return evictions.node_pressure_message(evictions.DISK, 10 * GiB, 9 * GiB, container["name"], use.ephemeral, request)
