"""Why the kubelet evicted a pod, read from the message it wrote (L4).

Pure. An eviction is the range's own fault when the pod used more disk than it
was given, and the node's fault when the node ran short of something the pod
did not over-use. The pod's `DisruptionTarget` condition cannot tell them apart:
the kubelet adds it (reason `TerminationByKubelet`) to every node-pressure
eviction, including one where our pod filled the node's disk, and leaves it off
a pod evicted for exceeding its own ephemeral-storage limit. So the message
decides.

The formats are the kubelet's own, from kubernetes/kubernetes
`pkg/kubelet/eviction/helpers.go` (each ends in ". ", the trailing space
included), and `Reason = "Evicted"` is what the pod's `status.reason` says.
"""

from __future__ import annotations

import re

REASON = "Evicted"
NODE_LOW_FMT = "The node was low on resource: {resource}. "
THRESHOLD_FMT = "Threshold quantity: {threshold}, available: {available}. "
CONTAINER_FMT = "Container {name} was using {usage}, request is {request}, has larger consumption of {resource}. "
POD_EPHEMERAL_FMT = "Pod ephemeral local storage usage exceeds the total limit of containers {limit}. "
CONTAINER_EPHEMERAL_FMT = 'Container {name} exceeded its local ephemeral storage limit "{limit}". '
EMPTYDIR_FMT = 'Usage of EmptyDir volume "{volume}" exceeds the limit "{limit}". '
DISK = "ephemeral-storage"

# The pod's own limits: the kubelet evicts these without a DisruptionTarget condition.
_OWN_LIMIT = re.compile(
    r"Pod ephemeral local storage usage exceeds the total limit of containers"
    r"|Container \S+ exceeded its local ephemeral storage limit"
    r"|Usage of EmptyDir volume \S+ exceeds the limit"
)
_NODE_LOW = re.compile(r"The node was low on resource: ([\w.\-/]+)\.")
_OVER_REQUEST = re.compile(r"Container \S+ was using \S+, request is \S+, has larger consumption of ([\w.\-/]+)\.")

_BINARY = (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10))


def quantity(n: int) -> str:
    """Bytes as `resource.Quantity.String()` prints a BinarySI value: the largest exact suffix."""
    n = int(n)
    for suffix, size in _BINARY:
        if n and n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


def node_pressure_message(
    resource: str, threshold: int, available: int, container: str | None = None, usage: int = 0, request: int = 0
) -> str:
    """The kubelet's `evictionMessage` for a node short of `resource`."""
    text = NODE_LOW_FMT.format(resource=resource)
    text += THRESHOLD_FMT.format(threshold=quantity(threshold), available=quantity(available))
    if container is not None:
        text += CONTAINER_FMT.format(
            name=container, usage=quantity(usage), request=quantity(request), resource=resource
        )
    return text


def own_disk_eviction(pod_reason: str | None, message: str) -> bool:
    """Evicted for the range's own disk use: over its limit, or the disk hog of a node short of disk."""
    if pod_reason != REASON:
        return False
    if _OWN_LIMIT.search(message):
        return True
    low = _NODE_LOW.search(message)
    return bool(low and low.group(1) == DISK and DISK in _OVER_REQUEST.findall(message))


def node_pressure(pod_reason: str | None, message: str) -> str | None:
    """The resource a node ran short of when it evicted this pod, or None."""
    if pod_reason != REASON:
        return None
    low = _NODE_LOW.search(message)
    return low.group(1) if low else None
