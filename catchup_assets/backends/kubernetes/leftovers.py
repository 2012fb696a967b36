"""What a mission left on the cluster, and its deletion: a part of `KubernetesBackend` (ports.Cleanup).

One LIST of the mission's Jobs and one of its PVCs, by the mission's label selector, and a
delete by name of each object chosen (Jobs with propagationPolicy Background, so their pods
go too, then PVCs): the Role needs `list` and `delete` on both, never `deletecollection`.
A PVC's size is the larger of its request and its capacity, read as Kubernetes quantities.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable

from kubernetes.client import V1DeleteOptions, V1Job, V1PersistentVolumeClaim
from kubernetes.utils.quantity import parse_quantity

from catchup_assets.backends.kubernetes import names as n
from catchup_assets.backends.kubernetes.identity import JOB, PVC, describe
from catchup_assets.backends.kubernetes.json_views import ModelView
from catchup_assets.core.dispatch.ports import Leftover

log = logging.getLogger("catchup_assets.backends.kubernetes.backend")


def _finished(job) -> bool:
    conditions = (job.status.conditions if job.status else None) or []
    return any(c.type in ("Complete", "Failed") and c.status == "True" for c in conditions)


def _bytes(claim, quantity) -> int:
    """A quantity from the API server in bytes; one that does not parse counts 0, with a warning."""
    if quantity is None:
        return 0
    try:
        return max(int(parse_quantity(quantity)), 0)
    except (ValueError, TypeError, ArithmeticError):
        log.warning("PVC %s: storage %r is not a Kubernetes quantity: counted as 0", claim.metadata.name, quantity)
        return 0


def _range_key(obj) -> str | None:
    return (obj.metadata.labels or {}).get(n.LABEL_RANGE_KEY)


def _attempt(job) -> int | None:
    """The Job's attempt number, from its label: what cleanup reads the attempt's record by."""
    value = (job.metadata.labels or {}).get(n.LABEL_ATTEMPT, "")
    return int(value) if value.isascii() and value.isdigit() else None


def _size(claim) -> int:
    requested = (claim.spec.resources.requests or {}) if claim.spec and claim.spec.resources else {}
    capacity = (claim.status.capacity or {}) if claim.status else {}
    return max(_bytes(claim, requested.get("storage")), _bytes(claim, capacity.get("storage")))


class Leftovers:
    """`leftovers` and `remove` for `KubernetesBackend` (it provides _call, _delete, batch, core, ns, selector,
    identity, mission)."""

    def leftovers(self) -> list[Leftover]:
        """The mission's own Jobs and PVCs: an object with its labels and not its identity (identity.py)
        is no leftover of it, and is never removed; each is named in a warning (issue 45)."""
        jobs = self._own(
            JOB, self._call(self.batch.list_namespaced_job, self.ns, label_selector=self.selector, read=True), V1Job
        )
        claims = self._own(
            PVC,
            self._call(
                self.core.list_namespaced_persistent_volume_claim, self.ns, label_selector=self.selector, read=True
            ),
            V1PersistentVolumeClaim,
        )
        out = [
            Leftover(
                Leftover.ATTEMPT,
                job.metadata.name,
                _range_key(job),
                live=not _finished(job) and job.metadata.deletion_timestamp is None,
                attempt=_attempt(job),
            )
            for job in jobs
        ]
        out += [Leftover(Leftover.VOLUME, c.metadata.name, _range_key(c), size_bytes=_size(c)) for c in claims]
        return sorted(out, key=lambda o: (o.kind, o.name))

    def _own(self, kind: str, body: bytes, model: type) -> list[ModelView]:
        out = []
        for item in json.loads(body).get("items") or []:
            why = self.identity.refusal(kind, item)
            if why is None:
                out.append(ModelView(item, model))
            else:
                log.warning(
                    "mission %s: %s is not the mission's (%s): left alone", self.mission, describe(kind, item), why
                )
        return out

    def remove(self, leftovers: Iterable[Leftover]) -> list[Leftover]:
        chosen = list(leftovers)
        background = V1DeleteOptions(propagation_policy="Background")
        for o in chosen:
            if o.kind == Leftover.ATTEMPT:
                self._delete(self.batch.delete_namespaced_job, o.name, body=background)
        for o in chosen:
            if o.kind == Leftover.VOLUME:
                self._delete(self.core.delete_namespaced_persistent_volume_claim, o.name)
        names = {(o.kind, o.name) for o in chosen}
        return [o for o in self.leftovers() if (o.kind, o.name) in names]
