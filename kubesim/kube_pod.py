"""What the simulated kubelet reads from a pod spec and reports about a pod.

Kept apart from the lifecycle in kubelet.py: the checks that keep a container
from being created (issue 4, item 6: a bad image, a missing ConfigMap or
Secret) and the per-pod block of the kubelet's `/stats/summary`.
"""

from __future__ import annotations

from datetime import UTC, datetime

from kubernetes.utils import parse_quantity

from kubesim.kube_script import Script, Usage

PULL_BACKOFF = 10.0  # seconds of ErrImagePull before the kubelet reports ImagePullBackOff


def blocker(store, pod: dict, script: Script, t_ready: float, now: float) -> tuple[str, str]:
    """(waiting reason, message) that keeps the container from starting, or ("", "")."""
    ns = pod["metadata"]["namespace"]
    image = pod["spec"]["containers"][0]["image"]
    if script.image_pull_error:
        if now < t_ready + PULL_BACKOFF:
            return "ErrImagePull", f'failed to pull and unpack image "{image}": not found'
        return "ImagePullBackOff", f'Back-off pulling image "{image}"'
    if script.missing_configmap:
        return "CreateContainerConfigError", f'configmap "{script.missing_configmap}" not found'
    for c in pod["spec"]["containers"]:
        refs = [(e.get("configMapRef"), "configmaps") for e in c.get("envFrom") or []]
        refs += [(e.get("secretRef"), "secrets") for e in c.get("envFrom") or []]
        for e in c.get("env") or []:
            src = e.get("valueFrom") or {}
            refs += [(src.get("configMapKeyRef"), "configmaps"), (src.get("secretKeyRef"), "secrets")]
        for ref, plural in refs:
            if ref and not ref.get("optional") and store.live(plural, ns, ref["name"]) is None:
                return "CreateContainerConfigError", f'{plural[:-1]} "{ref["name"]}" not found'
    for vol in pod["spec"].get("volumes") or []:
        for key, plural, name_key in (("configMap", "configmaps", "name"), ("secret", "secrets", "secretName")):
            src = vol.get(key)
            if src and not src.get("optional") and store.live(plural, ns, src.get(name_key, "")) is None:
                # A missing volume source never gets as far as a config error.
                return "ContainerCreating", (
                    f"MountVolume.SetUp failed for volume "
                    f'"{vol["name"]}" : {plural[:-1]} '
                    f'"{src.get(name_key)}" not found'
                )
    return "", ""


def ephemeral_limit(pod: dict) -> str | None:
    """The pod's total ephemeral-storage limit as the eviction message quotes it."""
    limits = [
        ((c.get("resources") or {}).get("limits") or {}).get("ephemeral-storage") for c in pod["spec"]["containers"]
    ]
    limits = [x for x in limits if x]
    if not limits:
        return None
    return limits[0] if len(limits) == 1 else str(sum(parse_quantity(x) for x in limits))


def pod_stats(pod: dict, use: Usage, when: str) -> dict:
    """One entry of `pods` in /stats/summary."""
    mem = {
        "time": when,
        "usageBytes": use.usage_bytes,
        "workingSetBytes": use.working_set,
        "rssBytes": use.rss,
        "pageFaults": 0,
        "majorPageFaults": 0,
    }
    cpu = {"time": when, "usageNanoCores": 1_000_000_000}
    meta, start = pod["metadata"], pod["status"].get("startTime")
    return {
        "podRef": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
        "startTime": start,
        "containers": [
            {"name": c["name"], "startTime": start, "memory": dict(mem), "cpu": dict(cpu)}
            for c in pod["spec"]["containers"]
        ],
        "cpu": cpu,
        "memory": mem,
        "ephemeral-storage": {"time": when, "usedBytes": use.ephemeral, "inodesUsed": 1000},
        "process_stats": {"process_count": 1},
    }


def core_stamp(t: float) -> str:
    """stellar-core's own line prefix time: milliseconds, no zone."""
    stamp = datetime.fromtimestamp(t, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}"
