"""The mission namespace's Pod Security label, read once on the dispatcher's first pass (issue 24).

Whoever holds the run pods' token may create Jobs in the mission namespace; only the namespace's
`pod-security.kubernetes.io/enforce: restricted` label keeps those pods unprivileged (no hostPath,
no privileged containers on the tier nodes). The chart labels the namespace it creates
(`missionNamespace.create`); one the operator made may lack it. So the backend reads the label
(a cluster-scoped `get` on `namespaces`, which the chart grants for this one namespace by
resourceNames) and says so when it is missing: an alert, a warning in the run's log, never a
failure, since the mission itself runs the same. A Forbidden answer is a warning too, naming the
verb to grant. An API server that answers nothing now leaves the check to the next pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kubernetes.client import ApiException

from catchup_assets.core.dispatch.ports import TransientBackendError

log = logging.getLogger("catchup_assets.backends.kubernetes.backend")

ENFORCE_LABEL = "pod-security.kubernetes.io/enforce"
RESTRICTED = "restricted"


def namespace_alert(read_namespace: Callable[[str], object], namespace: str) -> str | None:
    """What is wrong with the namespace's Pod Security label, or None when it enforces restricted.

    Raises TransientBackendError when the API server could not answer (the caller asks again)."""
    try:
        ns = read_namespace(namespace)
    except ApiException as exc:
        if exc.status == 403:
            return (
                f"cannot check namespace {namespace}'s {ENFORCE_LABEL} label: the mission's account may not "
                f"`get` namespaces (Forbidden); grant get on namespaces with resourceNames [{namespace}] "
                "(the chart's mission-namespace ClusterRole, docs/deploy.md)"
            )
        if exc.status == 404:
            return f"namespace {namespace} does not exist: range Jobs cannot be created there"
        return f"cannot check namespace {namespace}'s {ENFORCE_LABEL} label: HTTP {exc.status} {exc.reason}"
    enforce = (ns.metadata.labels or {}).get(ENFORCE_LABEL)
    if enforce == RESTRICTED:
        return None
    found = f"it is {enforce!r}" if enforce is not None else "it has no such label"
    return (
        f"namespace {namespace} is not labelled {ENFORCE_LABEL}={RESTRICTED} ({found}): whoever holds the "
        "run pods' token can start privileged or hostPath pods there; label it (docs/runbook.md, "
        '"The mission namespace is not restricted")'
    )


class NamespaceCheck:
    """A part of KubernetesBackend: `check_namespace_once()` at the top of each observe."""

    mission: str
    ns: str
    core: object
    _call: Callable
    _namespace_checked = False
    namespace_alert: str | None = None  # what the check found, for whoever asks (tests, status)

    def check_namespace_once(self) -> None:
        if self._namespace_checked:
            return
        try:
            alert = namespace_alert(lambda name: self._call(self.core.read_namespace, name), self.ns)
        except TransientBackendError as exc:
            log.info("mission %s: namespace %s's labels unread for now (%s)", self.mission, self.ns, exc)
            return
        self._namespace_checked, self.namespace_alert = True, alert
        if alert:
            log.warning("mission %s: %s", self.mission, alert)
