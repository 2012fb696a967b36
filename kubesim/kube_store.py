"""The simulated cluster's etcd: objects by resource, namespace and name.

Objects are kept as the JSON dicts the API server would send, so the HTTP
layer only serializes and tests can assert on exactly what a client reads.
Creation validates and defaults each object as the API server does
(kube_resources.py: what it serves, and what it does to an object on its way in).

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

from kubesim.kube_logs import PodLogs
from kubesim.kube_meta import (
    ApiError,
    ManualClock,
    already_exists,
    field_matcher,
    label_matcher,
    not_found,
    rfc3339,
)
from kubesim.kube_resources import DEFAULTS, RESOURCES, validate
from kubesim.kube_watch import WatchLog


def _clone(obj):
    # Objects are JSON by construction; a JSON round trip copies them ~3x faster than deepcopy.
    return json.loads(json.dumps(obj))


# k8s.io/apimachinery/pkg/util/rand: no vowels, no look-alikes.
_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_PLURAL_OF_KIND = {r.kind: r.plural for r in RESOURCES.values()}


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

    def create(self, plural: str, ns: str | None, body: dict, manager: str | None = None) -> dict:
        """Store a new object; `manager`: whom its managedFields name, as the API server records a create."""
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
            validate(res, obj)
            if (ns, name) in self._objs[plural]:
                raise already_exists(plural, res.group, name)
            obj["apiVersion"], obj["kind"] = res.api_version, res.kind
            meta["uid"] = self.new_uid()
            meta["creationTimestamp"] = rfc3339(self.clock())
            meta.pop("resourceVersion", None)
            if manager is not None:
                # ManagedFieldsEntry as the API reference gives it (kubernetes.io/docs/reference/generated/
                # kubernetes-api/v1.35/#managedfieldsentry-v1-meta) and Server-Side Apply's docs describe a
                # create through a non-apply request: operation "Update" (kubernetes.io/docs/reference/using-api/
                # server-side-apply/#field-management); fieldsV1 is left out, no reader of ours uses it.
                meta["managedFields"] = [
                    {
                        "manager": manager,
                        "operation": "Update",  # what kube-apiserver records for a create too
                        "apiVersion": res.api_version,
                        "time": meta["creationTimestamp"],
                        "fieldsType": "FieldsV1",
                    }
                ]
            DEFAULTS.get(plural, lambda s, o: None)(self, obj)
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
            validate(res, new)
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
