"""What the simulated API server serves, and what it does to an object on its way into the store.

The resources (kind, group, scope); validation, with the API server's causes;
and the server-side defaulting the code under test depends on: a Job gets
`spec.selector` and the `controller-uid`/`job-name` labels on its template,
and its own labels default to the template's; `backoffLimit` defaults to 6
(which is why L1 sets 0 explicitly); a pod gets its QoS class, a namespace
the label of its name.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kubesim.kube_meta import invalid, label_problems, name_problems, rfc3339


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

TRACKING_LABELS = ("batch.kubernetes.io/controller-uid", "batch.kubernetes.io/job-name", "controller-uid", "job-name")


def validate(res: Resource, obj: dict) -> None:
    """Refuse what the API server's validation refuses, with its causes (field, message)."""
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


def _default_job(store, job: dict) -> None:
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


def _default_pod(store, pod: dict) -> None:
    _default_pod_spec(pod.setdefault("spec", {}))
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(pod["spec"])}


def _default_pvc(store, pvc: dict) -> None:
    pvc.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    pvc["status"] = {"phase": "Pending"}


def _default_node(store, node: dict) -> None:
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


def _default_namespace(store, ns: dict) -> None:
    ns["metadata"].setdefault("labels", {})[NAMESPACE_NAME_LABEL] = ns["metadata"]["name"]
    ns.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    ns["status"] = {"phase": "Active"}


def implicit_namespace(store, name: str) -> dict:
    """A namespace nobody created, as `kubectl create namespace NAME` would have made it: every
    namespace exists here (kube_api.py), so a GET of one finds it, with no label but its name's."""
    meta = {"name": name, "uid": str(uuid.uuid5(uuid.NAMESPACE_DNS, name)), "resourceVersion": "1",
            "creationTimestamp": rfc3339(0)}  # fmt: skip
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": meta}
    _default_namespace(store, ns)
    return ns


DEFAULTS = {"jobs": _default_job, "pods": _default_pod, "persistentvolumeclaims": _default_pvc, "nodes": _default_node,
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
