"""Whose a Kubernetes object is: the mission's identity on every Job and PVC it makes (issue 45 item 1).

A name and labels say nothing of who made an object: anyone who can create Jobs in the
namespace can give one ours, and a 409 on our next attempt's name was once read as "adopted".
So every Job and PVC the backend makes carries two annotations:

- `catchup.stellar.org/spec-sha256`: the sha256 of what it built, over the fields a forger would
  change to forge a result: the pod template's containers (image, command, args, env, mounts) and
  volumes. Fields the API server defaults or canonicalises (resources, security contexts) are left
  out, so the digest of the object as the server holds it is the digest of the one we sent.
- `catchup.stellar.org/identity`: an HMAC-SHA256, keyed with the mission's nonce (kept in
  mission.json on the storage root), of the object's kind, namespace, name and spec digest.

An object is ours when its identity annotation is the HMAC of its own kind, namespace, name and
its own spec digest recomputed from what the server holds. The nonce never leaves the storage root:
reading our Jobs shows only keyed hashes each bound to one name and one spec, so no one can make a
Job under another name, or with another image, that passes, and two deployments planning the same
mission name in one namespace (two storage roots, two nonces) refuse each other's objects.

A pod is checked too: its Job (ownerReferences, by uid) must be ours and its `catchup` container
must run what that Job's template says (`worker_digest`), as ownerReferences are whatever a pod's
creator wrote. Only the `catchup` container is compared: admission webhooks may add others.

Pure over the objects' JSON (camelCase, as the server sends it and `manifests.to_dict` gives it).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from catchup_assets.backends.kubernetes.names import CONTAINER
from catchup_assets.core.values.mission_nonce import MissionNonce

ANNOTATION_IDENTITY = "catchup.stellar.org/identity"
ANNOTATION_SPEC = "catchup.stellar.org/spec-sha256"
# Where the informers' kept objects (observe.kept_job, kept_pod) carry the digests of the parts they drop.
KEPT = "catchupDigests"


def _canonical(value) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def _container(c: dict) -> dict:
    env = [
        {"name": e.get("name"), "value": e.get("value") or "", "valueFrom": e.get("valueFrom")}
        for e in c.get("env") or ()
    ]
    mounts = [
        {
            "name": v.get("name"),
            "mountPath": v.get("mountPath"),
            "readOnly": bool(v.get("readOnly")),
            "subPath": v.get("subPath") or "",
        }
        for v in c.get("volumeMounts") or ()
    ]
    return {
        "name": c.get("name"),
        "image": c.get("image"),
        "command": c.get("command") or [],
        "args": c.get("args") or [],
        "env": env,
        "mounts": mounts,
    }


def spec_digest(pod_spec: dict | None) -> str:
    """sha256 of what a pod template runs: its containers and init containers, and its volumes whole."""
    spec = pod_spec or {}
    projection = {
        "containers": [_container(c) for c in spec.get("containers") or ()],
        "initContainers": [_container(c) for c in spec.get("initContainers") or ()],
        "volumes": sorted((spec.get("volumes") or ()), key=lambda v: v.get("name") or ""),
    }
    return hashlib.sha256(_canonical(projection)).hexdigest()


def worker_digest(pod_spec: dict | None) -> str | None:
    """sha256 of the `catchup` container's image, command, args and env; None if it has none."""
    for c in (pod_spec or {}).get("containers") or ():
        if c.get("name") == CONTAINER:
            w = _container(c)
            return hashlib.sha256(_canonical([w["image"], w["command"], w["args"], w["env"]])).hexdigest()
    return None


def volume_digest(claim_spec: dict | None) -> str:
    """sha256 of a PVC's access modes: the rest is defaulted (storage class) or canonicalised (size)."""
    return hashlib.sha256(_canonical(sorted((claim_spec or {}).get("accessModes") or ()))).hexdigest()


JOB, PVC = "Job", "PersistentVolumeClaim"


def object_digest(kind: str, obj: dict) -> str:
    """The spec digest of a Job (its pod template) or a PVC, from its JSON. The kind is the caller's:
    a LIST's items carry none."""
    spec = obj.get("spec") or {}
    if kind == PVC:
        return volume_digest(spec)
    return spec_digest(((spec.get("template") or {}).get("spec")) or {})


def creator(obj: dict) -> str:
    """Who made the object, as the API server says: its managers (managedFields, whose operation is
    `Update` or `Apply` however the object was made), the object's own before its status', the earliest
    first; else its owners; else that it does not say."""
    meta = obj.get("metadata") or {}
    fields = sorted(meta.get("managedFields") or (), key=lambda f: (bool(f.get("subresource")), f.get("time") or ""))
    managers = [f.get("manager") for f in fields if f.get("manager")]
    if managers:
        return "created by " + ", ".join(dict.fromkeys(managers))
    owners = [f"{o.get('kind')}/{o.get('name')}" for o in meta.get("ownerReferences") or ()]
    if owners:
        return "owned by " + ", ".join(owners)
    return "its creator not named by the API server (no managedFields, no ownerReferences)"


@dataclass(frozen=True)
class MissionIdentity:
    """The mission's nonce (core/values/mission_nonce.py), and what it signs: `annotations` for an object
    we make, `refusal` of one we did not."""

    nonce: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "_key", MissionNonce(self.nonce))

    def _tag(self, kind: str, namespace: str, name: str, digest: str) -> str:
        return self._key.sign(kind, namespace, name, digest)

    def annotations(self, kind: str, obj: dict) -> dict[str, str]:
        """The two annotations of an object we are about to create (its JSON, as sent)."""
        meta = obj.get("metadata") or {}
        digest = object_digest(kind, obj)
        tag = self._tag(kind, meta.get("namespace") or "", meta.get("name") or "", digest)
        return {ANNOTATION_SPEC: digest, ANNOTATION_IDENTITY: tag}

    def refusal(self, kind: str, obj: dict, expected_digest: str | None = None) -> str | None:
        """Why `obj` (its whole JSON, or an informer's kept copy) is not ours; None if it is.

        `expected_digest`: the spec we would have built under its name (a 409's read-back): it must
        be that one, not merely some spec of ours."""
        meta = obj.get("metadata") or {}
        notes = meta.get("annotations") or {}
        kept = obj.get(KEPT) or {}
        digest = kept.get("spec") or object_digest(kind, obj)
        if ANNOTATION_IDENTITY not in notes:
            return f"it has no {ANNOTATION_IDENTITY} annotation"
        if notes.get(ANNOTATION_SPEC) != digest:
            return f"its {ANNOTATION_SPEC} annotation is not the digest of its own spec ({digest[:12]})"
        if expected_digest is not None and digest != expected_digest:
            return f"its spec ({digest[:12]}) is not the one this attempt builds ({expected_digest[:12]})"
        if not self._key.signed(
            notes.get(ANNOTATION_IDENTITY), kind, meta.get("namespace") or "", meta.get("name") or "", digest
        ):
            return "its identity is not this mission's (another deployment's, or forged)"
        return None


def describe(kind: str, obj: dict) -> str:
    """`<Kind> <namespace>/<name> (<who made it>)`: the object as the operator is told of it."""
    meta = obj.get("metadata") or {}
    return f"{kind} {meta.get('namespace')}/{meta.get('name')} ({creator(obj)})"


def pod_owner(pod: dict, ours_by_uid: dict[str, dict]) -> str | None:
    """The name of the Job of ours that owns `pod` (ownerReferences, by uid), if its `catchup`
    container runs what that Job's template says; None for any other pod."""
    kept = pod.get(KEPT) or {}
    worker = kept.get("worker") if KEPT in pod else worker_digest(pod.get("spec"))
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        job = ours_by_uid.get(ref.get("uid") or "")
        if ref.get("kind") == JOB and job is not None:
            expected = (job.get(KEPT) or {}).get("worker")
            if worker is not None and worker == expected:
                return (job.get("metadata") or {}).get("name")
    return None
