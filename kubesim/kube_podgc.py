"""PodGC's orphans (pkg/controller/podgc gc_controller.go, gcOrphaned), over the simulated store.

A pod bound to a node gone for its 40 s quarantine is failed with
DisruptionTarget `DeletionByPodGC`, then deleted with grace 0
(markFailedAndDeletePodWithCondition). Until then it stays as its kubelet
last wrote it, Running. The controller's 20 s check period is not modelled:
the pods go as the quarantine ends.
"""

from __future__ import annotations

from kubesim.kube_meta import set_condition as _condition
from kubesim.kube_script import DISRUPTION_MESSAGES
from kubesim.kube_store import Store

PODGC_QUARANTINE = 40.0  # podgc's quarantineTime: how long a node must stay gone before its pods are collected
TERMINAL = ("Succeeded", "Failed")


class PodGC:
    def __init__(self, store: Store) -> None:
        self.store = store
        self._gone_at: dict[str, float] = {}  # node -> when it went (the quarantine counts from then)

    def node_gone(self, node: str, t: float) -> None:
        self._gone_at[node] = t

    def collect(self, now: float) -> None:
        """Fail and delete the pods of every node gone for the quarantine."""
        for pod in self.store.select("pods"):
            node = pod["spec"].get("nodeName")
            if not node or self.store.live("nodes", None, node) is not None:
                continue
            if now - self._gone_at.setdefault(node, now) < PODGC_QUARANTINE:
                continue
            if pod["status"].get("phase") not in TERMINAL:
                pod["status"]["phase"] = "Failed"
                _condition(
                    pod, "DisruptionTarget", "True", now, "DeletionByPodGC", DISRUPTION_MESSAGES["DeletionByPodGC"]
                )
                self.store.bump(pod)
            self.store.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])
