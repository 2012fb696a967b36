"""The strategic merge patch a kubelet sends for a status it changed: the two-way diff of old and new.

As the kubelet's status manager does (pkg/util/pod.PatchPodStatus, which calls
apimachinery's strategicpatch.CreateTwoWayMergePatch): a map key gone is sent as null;
a list whose Go field carries `patchStrategy:"merge"` is merged element by element on its
`patchMergeKey` (an element gone is sent as `{"$patch": "delete", key: value}`); any other
list is sent whole. So a condition another writer added (DisruptionTarget from the eviction
API or PodGC) survives a kubelet's patch that never mentioned it.

The merge keys are those of k8s.io/api core/v1 types.go (v0.37.2): PodStatus.Conditions on
`type`, PodStatus.PodIPs and HostIPs on `ip`; NodeStatus.Conditions and Addresses on `type`.
ContainerStatuses has no patch strategy: the kubelet's whole list replaces the old.
"""

from __future__ import annotations

MERGE_KEYS = {"conditions": "type", "podIPs": "ip", "hostIPs": "ip", "addresses": "type"}


def two_way(old: dict, new: dict) -> dict:
    """The patch that turns `old` into `new` (empty when they are equal)."""
    patch: dict = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        before = old.get(key)
        if value == before:
            continue
        if isinstance(value, dict) and isinstance(before, dict):
            patch[key] = two_way(before, value)
        elif key in MERGE_KEYS and isinstance(value, list) and isinstance(before, list):
            patch[key] = _merge_list(MERGE_KEYS[key], before, value)
        else:
            patch[key] = value
    return patch


def _merge_list(merge_key: str, old: list[dict], new: list[dict]) -> list[dict]:
    was = {item.get(merge_key): item for item in old}
    out = []
    for item in new:
        before = was.get(item.get(merge_key))
        if before is None:
            out.append(item)
        elif item != before:
            out.append({**two_way(before, item), merge_key: item.get(merge_key)})
    now = {item.get(merge_key) for item in new}
    out += [{"$patch": "delete", merge_key: k} for k in was if k not in now]
    return out
