"""The simulated cluster's etcd: objects by resource, namespace and name.

Objects are kept as the JSON dicts the API server would send, so the HTTP
layer only serializes and tests can assert on exactly what a client reads.
Creation applies the server-side defaulting the code under test depends on:
a Job gets `spec.selector` and the `controller-uid`/`job-name` labels on its
template, and its own labels default to the template's; `backoffLimit`
defaults to 6 (which is why L1 sets 0 explicitly).

One re-entrant lock guards everything. The HTTP threads and the kubelet take
it for a whole request or step; the public `get`/`list` return deep copies so
a test never sees an object change under it.
"""

from __future__ import annotations

import json
import random
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from kubesim.kube_logs import PodLogs
from kubesim.kube_meta import (
    ApiError,
    ManualClock,
    already_exists,
    field_matcher,
    invalid,
    label_matcher,
    label_problems,
    name_problems,
    not_found,
    rfc3339,
)
from kubesim.kube_watch import WatchLog


def _clone(obj):
    # Objects are JSON by construction; a JSON round trip copies them ~3x faster than deepcopy.
    return json.loads(json.dumps(obj))


@dataclass(frozen=True)
class Resource:
    plural: str
    kind: str
    group: str  # "" for the core group
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/v1" if self.group else "v1"


RESOURCES = {
    r.plural: r
    for r in (
        Resource("jobs", "Job", "batch"),
        Resource("pods", "Pod", ""),
        Resource("persistentvolumeclaims", "PersistentVolumeClaim", ""),
        Resource("configmaps", "ConfigMap", ""),
        Resource("secrets", "Secret", ""),
        Resource("events", "Event", ""),
        Resource("nodes", "Node", "", namespaced=False),
        Resource("namespaces", "Namespace", "", namespaced=False),
    )
}

# k8s.io/apimachinery/pkg/util/rand: no vowels, no look-alikes.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_PLURAL_OF_KIND = {r.kind: r.plural for r in RESOURCES.values()}
TRACKING_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid", "job-name")


class Store:
    def __init__(self, clock: Callable[[], float] | None = None, seed: int = 0) -> None:
        self.clock = clock or ManualClock()
        self.lock = threading.RLock()
        self.rng = random.Random(seed)
        self.logs = PodLogs()
        self.kubelet = None  # set by a Kubelet; the server asks it for node stats
        self._objs: dict[str, dict[tuple[str, str], dict]] = {p: {} for p in RESOURCES}
        self._rv = 1000
        self._events: dict[tuple[str, str, str], tuple[str, str]] = {}  # folding index
        self.watch = WatchLog(self.lock)  # every write's watch event (kube_watch.py)

    # --- helpers used by the server and the controllers ---------------------

    def bump(self, obj: dict, event: str = "MODIFIED") -> None:
        """Record a modification: every write gets a new resourceVersion and a watch event."""
        with self.lock:
            self._rv += 1
            obj["metadata"]["resourceVersion"] = str(self._rv)
            self.watch.record(_PLURAL_OF_KIND[obj["kind"]], obj, event)

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    def suffix(self, n: int = 5) -> str:
        return "".join(self.rng.choice(_NAME_ALPHABET) for _ in range(n))

    def new_uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def live(self, plural: str, ns: str | None, name: str) -> dict | None:
        return self._objs[plural].get((ns or "", name))

    def select(
        self, plural: str, ns: str | None = None, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict]:
        """Live objects in (namespace, name) order, as etcd lists them."""
        labels_ok = label_matcher(label_selector)
        fields_ok = field_matcher(plural, field_selector)
        table = self._objs[plural]
        out = []
        for key in sorted(table):
            if ns and key[0] != ns:
                continue
            obj = table[key]
            if labels_ok(obj["metadata"].get("labels")) and fields_ok(obj):
                out.append(obj)
        return out

    def put(self, plural: str, obj: dict) -> None:
        """Keep an object another server made, as it is (a remote kubelet's mirror, kubelet_remote.py)."""
        res = RESOURCES[plural]
        obj.setdefault("kind", res.kind)  # a list's items come without them
        obj.setdefault("apiVersion", res.api_version)
        with self.lock:
            self._objs[plural][(obj["metadata"].get("namespace") or "", obj["metadata"]["name"])] = obj

    def drop(self, plural: str, obj: dict) -> None:
        """Forget a kept object, if it is still the one kept."""
        with self.lock:
            key = (obj["metadata"].get("namespace") or "", obj["metadata"]["name"])
            if self._objs[plural].get(key) is obj:
                del self._objs[plural][key]
                if plural == "pods":
                    self.logs.drop(key[0], key[1])

    # --- verbs ----------------------------------------------------------------

    def create(self, plural: str, ns: str | None, body: dict) -> dict:
        res = RESOURCES[plural]
        with self.lock:
            obj = _clone(body)
            meta = obj.setdefault("metadata", {})
            if not meta.get("name") and meta.get("generateName"):
                meta["name"] = meta["generateName"] + self.suffix()
            name = meta.get("name") or ""
            ns = ns if res.namespaced else ""
            if res.namespaced:
                if meta.get("namespace") and meta["namespace"] != ns:
                    raise ApiError(
                        400,
                        "BadRequest",
                        "the namespace of the provided object does not match the namespace sent on the request",
                    )
                meta["namespace"] = ns
            self._validate(res, obj)
            if (ns, name) in self._objs[plural]:
                raise already_exists(plural, res.group, name)
            obj["apiVersion"], obj["kind"] = res.api_version, res.kind
            meta["uid"] = self.new_uid()
            meta["creationTimestamp"] = rfc3339(self.clock())
            meta.pop("resourceVersion", None)
            _DEFAULTS.get(plural, lambda s, o: None)(self, obj)
            self._objs[plural][(ns, name)] = obj
            self.bump(obj, "ADDED")
            return obj

    def get(self, plural: str, ns: str | None, name: str) -> dict:
        with self.lock:
            obj = self.live(plural, ns, name)
            if obj is None:
                raise not_found(plural, RESOURCES[plural].group, name)
            return _clone(obj)

    def list(
        self, plural: str, ns: str | None = None, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict]:
        with self.lock:
            return _clone(self.select(plural, ns, label_selector, field_selector))

    def count(self, plural: str, ns: str | None = None, label_selector: str | None = None) -> int:
        with self.lock:
            return len(self.select(plural, ns, label_selector))

    def replace(self, plural: str, ns: str | None, name: str, body: dict) -> dict:
        res = RESOURCES[plural]
        with self.lock:
            old = self.live(plural, ns, name)
            if old is None:
                raise not_found(plural, res.group, name)
            sent_rv = (body.get("metadata") or {}).get("resourceVersion")
            if sent_rv and sent_rv != old["metadata"]["resourceVersion"]:
                raise ApiError(
                    409,
                    "Conflict",
                    f"Operation cannot be fulfilled on {plural}"
                    f'{"." + res.group if res.group else ""} "{name}": the object has '
                    "been modified; please apply your changes to the latest version "
                    "and try again",
                    {"name": name, "group": res.group, "kind": plural},
                )
            new = _clone(body)
            new["apiVersion"], new["kind"] = res.api_version, res.kind
            meta = new.setdefault("metadata", {})
            for key in ("name", "namespace", "uid", "creationTimestamp", "ownerReferences"):
                if key in old["metadata"]:
                    meta[key] = old["metadata"][key]
            if "status" in old:  # status is a subresource: a PUT of the object keeps it
                new["status"] = old["status"]
            self._validate(res, new)
            self.bump(new)
            self._objs[plural][(ns or "", name)] = new
            return new

    def delete(self, plural: str, ns: str | None, name: str, propagation: str | None = None) -> tuple[dict, dict]:
        """Remove an object; returns (the object, the body the server answers)."""
        res = RESOURCES[plural]
        with self.lock:
            key = (ns or "", name)
            obj = self._objs[plural].get(key)
            if obj is None:
                raise not_found(plural, res.group, name)
            meta = obj["metadata"]
            if plural == "persistentvolumeclaims" and self._pvc_in_use(obj):
                # kubernetes.io/pvc-protection: the claim lingers while a pod uses it.
                meta.setdefault("deletionTimestamp", rfc3339(self.clock()))
                meta["finalizers"] = ["kubernetes.io/pvc-protection"]
                self.bump(obj)
                return obj, obj
            del self._objs[plural][key]
            if plural == "pods":
                self.logs.drop(ns or "", name)
            if plural == "jobs":
                # batch/v1 keeps the old default: without a policy the pods are orphaned.
                self._cascade(meta["uid"], propagation or "Orphan")
            self.bump(obj, "DELETED")
            if plural in ("pods", "persistentvolumeclaims"):
                return obj, obj
            return obj, {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": name, "group": res.group, "kind": plural, "uid": meta["uid"]},
            }

    def _cascade(self, owner_uid: str, propagation: str) -> None:
        for pod in list(self._objs["pods"].values()):
            refs = pod["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == owner_uid for r in refs):
                continue
            if propagation == "Orphan":
                pod["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != owner_uid]
                self.bump(pod)
            else:
                # Background and Foreground both end with the pods gone; the
                # simulation collects them at once rather than a GC tick later.
                self.delete("pods", pod["metadata"]["namespace"], pod["metadata"]["name"])

    def _pvc_in_use(self, pvc: dict) -> bool:
        name, ns = pvc["metadata"]["name"], pvc["metadata"]["namespace"]
        for pod in self.select("pods", ns):
            if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
                continue
            for vol in pod["spec"].get("volumes") or []:
                if (vol.get("persistentVolumeClaim") or {}).get("claimName") == name:
                    return True
        return False

    def finish_pvc_deletions(self) -> None:
        """The pvc-protection controller: drop claims whose last user is gone."""
        with self.lock:
            for key, pvc in list(self._objs["persistentvolumeclaims"].items()):
                if pvc["metadata"].get("deletionTimestamp") and not self._pvc_in_use(pvc):
                    del self._objs["persistentvolumeclaims"][key]
                    self.bump(pvc, "DELETED")

    def event(self, obj: dict, reason: str, message: str, component: str, type_: str = "Warning") -> None:
        """Record an Event about obj, folding repeats into `count` as the recorder does."""
        with self.lock:
            meta, now = obj["metadata"], rfc3339(self.clock())
            key = (meta["uid"], reason, message)
            known = self._events.get(key)
            ev = known and self.live("events", *known)
            if ev:
                ev["count"] += 1
                ev["lastTimestamp"] = now
                self.bump(ev)
                return
            ev = self.create(
                "events",
                meta.get("namespace"),
                {
                    "metadata": {"name": f"{meta['name']}.{self.rng.getrandbits(64):016x}"},
                    "involvedObject": {
                        "kind": obj["kind"],
                        "apiVersion": obj["apiVersion"],
                        "name": meta["name"],
                        "namespace": meta.get("namespace"),
                        "uid": meta["uid"],
                    },
                    "reason": reason,
                    "message": message,
                    "type": type_,
                    "count": 1,
                    "source": {"component": component},
                    "firstTimestamp": now,
                    "lastTimestamp": now,
                    "reportingComponent": component,
                },
            )
            self._events[key] = (ev["metadata"]["namespace"], ev["metadata"]["name"])

    # --- validation and defaulting ---------------------------------------------

    def _validate(self, res: Resource, obj: dict) -> None:
        meta = obj["metadata"]
        name = meta.get("name") or ""
        # A Job's name becomes a label value, so it must fit in 63 characters.
        causes = [("metadata.name", p) for p in name_problems(name, 63 if res.plural == "jobs" else 253)]
        causes += label_problems(meta.get("labels"), "metadata.labels")
        spec = obj.get("spec") or {}
        pod_spec, path = None, "spec"
        if res.plural == "jobs":
            template = spec.get("template") or {}
            causes += label_problems((template.get("metadata") or {}).get("labels"), "spec.template.metadata.labels")
            pod_spec, path = template.get("spec") or {}, "spec.template.spec"
            policy = pod_spec.get("restartPolicy")
            if policy not in ("Never", "OnFailure"):
                causes.append(
                    (
                        f"{path}.restartPolicy",
                        f'Unsupported value: "{policy or ""}": supported values: "OnFailure", "Never"',
                    )
                )
        elif res.plural == "pods":
            pod_spec = spec
        if pod_spec is not None:
            containers = pod_spec.get("containers") or []
            if not containers:
                causes.append((f"{path}.containers", "Required value"))
            for i, c in enumerate(containers):
                if not c.get("name"):
                    causes.append((f"{path}.containers[{i}].name", "Required value"))
                if not c.get("image"):
                    causes.append((f"{path}.containers[{i}].image", "Required value"))
        if causes:
            raise invalid(res.kind, res.group, name, causes)


def _default_pod_spec(spec: dict) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    for c in spec.get("containers") or []:
        c.setdefault("resources", {})
        c.setdefault("terminationMessagePath", "/dev/termination-log")
        c.setdefault("terminationMessagePolicy", "File")
        latest = ":" not in c.get("image", "").rsplit("/", 1)[-1] or c["image"].endswith(":latest")
        c.setdefault("imagePullPolicy", "Always" if latest else "IfNotPresent")


def _default_job(store: Store, job: dict) -> None:
    meta, spec = job["metadata"], job.setdefault("spec", {})
    template = spec.setdefault("template", {})
    tmeta = template.setdefault("metadata", {})
    if not meta.get("labels") and tmeta.get("labels"):
        meta["labels"] = dict(tmeta["labels"])
    uid, name = meta["uid"], meta["name"]
    tmeta["labels"] = {
        **(tmeta.get("labels") or {}),
        TRACKING_LABELS[0]: uid,
        TRACKING_LABELS[1]: name,
        TRACKING_LABELS[2]: uid,
        TRACKING_LABELS[3]: name,
    }
    spec["selector"] = {"matchLabels": {TRACKING_LABELS[0]: uid}}
    for key, value in (
        ("parallelism", 1),
        ("completions", 1),
        ("backoffLimit", 6),
        ("completionMode", "NonIndexed"),
        ("suspend", False),
        ("podReplacementPolicy", "TerminatingOrFailed"),
        ("manualSelector", None),
    ):
        if value is not None:
            spec.setdefault(key, value)
    _default_pod_spec(template.setdefault("spec", {}))
    job["status"] = {}


def _default_pod(store: Store, pod: dict) -> None:
    _default_pod_spec(pod.setdefault("spec", {}))
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(pod["spec"])}


def _default_pvc(store: Store, pvc: dict) -> None:
    pvc.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    pvc["status"] = {"phase": "Pending"}


def _default_node(store: Store, node: dict) -> None:
    status = node.setdefault("status", {})
    status.setdefault(
        "conditions",
        [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}],
    )


# The label the API server sets on every namespace, to its name, whatever the creator sent (since 1.21):
# https://kubernetes.io/docs/reference/labels-annotations-taints/#kubernetes-io-metadata-name. The spec's
# `kubernetes` finalizer and status.phase Active are the Namespace v1 API reference's
# (https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/namespace-v1/).
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


def _default_namespace(store: Store, ns: dict) -> None:
    ns["metadata"].setdefault("labels", {})[NAMESPACE_NAME_LABEL] = ns["metadata"]["name"]
    ns.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    ns["status"] = {"phase": "Active"}


def implicit_namespace(store: Store, name: str) -> dict:
    """A namespace nobody created, as `kubectl create namespace NAME` would have made it: every
    namespace exists here (kube_api.py), so a GET of one finds it, with no label but its name's."""
    meta = {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)), "resourceVersion": "1",
            "creationTimestamp": rfc3339(0)}  # fmt: skip
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
    _default_namespace(store, ns)
    return ns


_DEFAULTS = {"jobs": _default_job, "pods": _default_pod, "persistentvolumeclaims": _default_pvc, "nodes": _default_node,
             "namespaces": _default_namespace}  # fmt: skip


def qos_class(spec: dict) -> str:
    requests = limits = 0
    guaranteed = True
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        requests += len(req)
        limits += len(lim)
        for r in ("cpu", "memory"):
            if r not in lim or req.get(r, lim[r]) != lim[r]:
                guaranteed = False
    if requests == 0 and limits == 0:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"
