"""kubesim's kubelet as a client of a real API server: virtual nodes whose pods run as a Script says.

Only the kubelet and the cloud are virtual here (issue 34 item 3). The real kube-scheduler
binds pods to these nodes, the real Job controller makes and counts them, the real
garbage collector and PodGC delete them. This kubelet mirrors the pods bound to its nodes
into a kubesim Store and runs each through kubesim's Kubelet (kubelet.py), the code that
runs them on kubesim, so a script's outcomes are comparable across the two. It writes back
what a kubelet writes, through the real API:
- its Nodes (as the kubelet registers one) and each node's Lease in `kube-node-lease`,
  renewed every 10 s (the heartbeat node-lifecycle-controller reads, `leaseDurationSeconds` 40);
- each pod's status, as a strategic merge patch of what it changed (status_patch.py), so
  conditions others add (the eviction API's, PodGC's DisruptionTarget) stay;
- a pod's final delete with grace 0 once its containers have stopped after a graceful delete;
- `/stats/summary` and `/containerLogs` on each node's endpoint (kubelet_server.py), which
  the backend reads directly and the API server reaches for `pods/log`.
A node a script takes away (a spot reclaim, `disrupt_mode="node_gone"`) is deleted with its
Lease; the real PodGC then fails its pods with DisruptionTarget `DeletionByPodGC` and deletes
them (pkg/controller/podgc: after a 40 s quarantine, checked every 20 s).

The kubelet's own clock (`clock`) dates what it writes into pod statuses; it may run faster
than the wall (a scaled mission). Leases are renewed on the wall clock, which the control
plane reads. The kubelet acts with the credentials it is given (a test's admin), not as
`system:node:<name>` under the Node authorizer: NodeRestriction is not exercised.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from datetime import UTC, datetime

from kubernetes.client import ApiException, CoordinationV1Api, CoreV1Api

from kubesim.kube_script import Script
from kubesim.kube_store import Store
from kubesim.kubelet import Kubelet
from kubesim.kubelet_server import KubeletServer
from kubesim.status_patch import two_way
from kubesim.ticker import Ticker

LEASE_NS = "kube-node-lease"
# coordination.k8s.io/v1 Lease (API reference, "Lease"), as the kubelet keeps its node's: the
# nodeLeaseDurationSeconds default (KubeletConfiguration) and renewed at a quarter of it
# (pkg/kubelet/kubelet.go, nodeLeaseRenewIntervalFraction 0.25); renewTime is a metav1.MicroTime.
LEASE_SECONDS = 40
RENEW_EVERY = 10.0
SMP = "application/strategic-merge-patch+json"
# What a pod may mount that the kubelet must find first (kube_pod.blocker), read per namespace of its pods.
REFERRED = {
    "configmaps": lambda core, ns: core.list_namespaced_config_map(ns, _preload_content=False),
    "secrets": lambda core, ns: core.list_namespaced_secret(ns, _preload_content=False),
}


def _micro(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")  # metav1.MicroTime


class RemoteKubelet:
    """Virtual nodes' kubelet over a real API server; `start()` runs it on a thread, `step()` once."""

    def __init__(
        self,
        api_client,
        script: Callable[[dict], Script],
        *,
        clock: Callable[[], float] = time.time,
        wall: Callable[[], float] = time.time,
        stats_period: float = 10.0,
        authenticate: Callable[[str], str | None] | None = None,
        authorize: Callable[[str, str, str, str], bool] | None = None,
        client_ca: str | None = None,
    ) -> None:
        self.core, self.coordination = CoreV1Api(api_client), CoordinationV1Api(api_client)
        self.store = Store(clock=clock)  # the mirror: this kubelet's pods and nodes
        self.kubelet = Kubelet(self.store, script=script, clock=clock, stats_period=stats_period)
        auth = {"authorize": authorize, "authenticate": authenticate, "client_ca": client_ca}
        self.endpoints = KubeletServer(self.kubelet, **auth)
        self.wall = wall
        self.nodes: set[str] = set()
        self._sent: dict[str, dict] = {}  # pod uid -> the status the API server has from us
        self._renewed: dict[str, float] = {}  # node -> when its Lease was last renewed (wall)
        self._ticker = Ticker(self.step, "virtual kubelet")

    # --- nodes -------------------------------------------------------------------

    def add_node(self, name: str, labels: dict | None = None, taints: list | None = None, allocatable=None):
        """Register a Node as a kubelet does (its status with it), and its Lease."""
        with self.store.lock:
            mirror = self.kubelet.add_node(name, labels, taints, allocatable)
        body = {k: copy.deepcopy(mirror[k]) for k in ("metadata", "spec", "status")}
        body["metadata"] = {"name": name, "labels": body["metadata"]["labels"]}
        now = _rfc3339(self.wall())
        for cond in body["status"]["conditions"]:
            cond.update(lastHeartbeatTime=now, lastTransitionTime=now)
        made = self.core.create_node(body)
        # The API server keeps a created Node's status; set it again should a version drop it.
        self.core.patch_node_status(name, {"status": body["status"]}, _content_type=SMP)
        self.nodes.add(name)
        self._renew(name, made.metadata.uid)
        return made

    def remove_node(self, name: str) -> None:
        """The cloud takes the node away: it stops answering, its Node and Lease go."""
        with self.store.lock:
            if self.store.live("nodes", None, name) is not None:
                self.kubelet._drop_node(name)
        self._forget_node(name)

    def _forget_node(self, name: str) -> None:
        self.nodes.discard(name)
        self._renewed.pop(name, None)
        lease = lambda: self.coordination.delete_namespaced_lease(name, LEASE_NS)  # noqa: E731
        for delete in (lambda: self.core.delete_node(name), lease):
            try:
                delete()
            except ApiException as exc:
                if exc.status != 404:
                    raise

    def _renew(self, name: str, uid: str | None = None) -> None:
        now = self.wall()
        spec = {"holderIdentity": name, "leaseDurationSeconds": LEASE_SECONDS, "renewTime": _micro(now)}
        if uid is not None:
            owner = {"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid}
            body = {"metadata": {"name": name, "ownerReferences": [owner]}, "spec": spec}
            self.coordination.create_namespaced_lease(LEASE_NS, body)
        else:
            self.coordination.patch_namespaced_lease(name, LEASE_NS, {"spec": spec}, _content_type=SMP)
        self._renewed[name] = now

    # --- driving -------------------------------------------------------------------

    def start(self, interval: float = 0.1) -> None:
        self._ticker.start(interval)

    @property
    def errors(self) -> int:
        return self._ticker.errors

    def stop(self) -> None:
        self._ticker.stop()
        self.endpoints.stop()

    def step(self) -> None:
        """One sync: read the pods bound here, run them to now, write back what changed."""
        real, referred = self._bound_pods()
        with self.store.lock:
            self._adopt(real, referred)
            before = {p["metadata"]["uid"]: p for p in self.store.select("pods")}
            now = self.kubelet.clock()
            for pod in list(before.values()):
                meta = pod["metadata"]
                # An earlier pod's end (its node gone) may have taken this one with it.
                if self.store.live("pods", meta["namespace"], meta["name"]) is pod:
                    self.kubelet._advance(pod, now)
            after = {p["metadata"]["uid"]: p for p in self.store.select("pods")}
            gone_nodes = self.nodes - {n["metadata"]["name"] for n in self.store.select("nodes")}
            # A pod the kubelet deleted reports its final status first, as a kubelet does; a pod
            # whose node went away reports nothing more (no kubelet is left to).
            changed = [
                (p, two_way(self._sent.get(uid, {}), p["status"]))
                for uid, p in {**before, **after}.items()
                if p["spec"]["nodeName"] not in gone_nodes
            ]
            deleted = [p for uid, p in before.items() if uid not in after and p["spec"]["nodeName"] not in gone_nodes]
        for name in gone_nodes:  # reclaimed mid-run by a script: its pods are PodGC's now
            self._forget_node(name)
        for pod, patch in changed:
            if patch:
                self._patch_status(pod, patch)
        for pod in deleted:
            self._final_delete(pod)
        for name in list(self.nodes):
            if self.wall() - self._renewed.get(name, 0.0) >= RENEW_EVERY:
                self._renew(name)

    def _bound_pods(self) -> tuple[dict[str, dict], dict[str, list[dict]]]:
        """The pods bound here, and what they refer to in their namespaces (the kubelet's pod sources)."""
        pods = json.loads(self.core.list_pod_for_all_namespaces(_preload_content=False).data)["items"]
        mine = {p["metadata"]["uid"]: p for p in pods if p["spec"].get("nodeName") in self.nodes}
        referred: dict[str, list[dict]] = {plural: [] for plural in REFERRED}
        for ns in sorted({p["metadata"]["namespace"] for p in mine.values()}):
            for plural, read in REFERRED.items():
                referred[plural] += json.loads(read(self.core, ns).data)["items"]
        # Every claim, bound here or not: a claim's files outlive its pods (a reclaimed attempt's log
        # waits on its volume for the next attempt, whenever that comes).
        claims = self.core.list_persistent_volume_claim_for_all_namespaces(_preload_content=False)
        referred["persistentvolumeclaims"] = json.loads(claims.data)["items"]
        return mine, referred

    def _adopt(self, real: dict[str, dict], referred: dict[str, list[dict]]) -> None:
        """New pods into the mirror; a graceful delete begun elsewhere becomes the kubelet's kill."""
        for plural, objs in referred.items():  # what a pod mounts, as the API server holds it now
            for old in self.store.select(plural):
                self.store.drop(plural, old)
            for obj in objs:
                self.store.put(plural, obj)
        mine = {p["metadata"]["uid"]: p for p in self.store.select("pods")}
        for uid, pod in real.items():
            if uid not in mine:
                pod.setdefault("status", {})
                self.store.put("pods", pod)
                self._sent[uid] = copy.deepcopy(pod["status"])
            elif pod["metadata"].get("deletionTimestamp") and not mine[uid]["metadata"].get("deletionTimestamp"):
                self.kubelet.kill(mine[uid], self.kubelet.clock())
        for uid, pod in mine.items():
            if uid not in real:  # deleted for good (grace 0, by PodGC or by us): nothing left to run
                self.store.drop("pods", pod)
                self._sent.pop(uid, None)
                self.kubelet.runs.pop(uid, None)
        # A claim's files outlive its pods, and go with the claim (kube_volumes.py).
        claims = {f"pvc:{c['metadata']['uid']}" for c in referred["persistentvolumeclaims"]}
        self.kubelet.volumes.forget(claims | {f"pod:{uid}" for uid in real})

    def _patch_status(self, pod: dict, patch: dict) -> None:
        meta = pod["metadata"]
        try:
            self.core.patch_namespaced_pod_status(meta["name"], meta["namespace"], {"status": patch}, _content_type=SMP)
        except ApiException as exc:
            if exc.status != 404:  # gone meanwhile: the next sync drops it
                raise
            return
        self._sent[meta["uid"]] = copy.deepcopy(pod["status"])

    def _final_delete(self, pod: dict) -> None:
        meta = pod["metadata"]
        body = {"gracePeriodSeconds": 0, "preconditions": {"uid": meta["uid"]}}
        try:
            self.core.delete_namespaced_pod(meta["name"], meta["namespace"], body=body)
        except ApiException as exc:
            if exc.status not in (404, 409):  # already gone, or a new pod of that name
                raise


def _rfc3339(t: float) -> str:
    return datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
