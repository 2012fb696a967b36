"""A live attempt's pod log, read for an operator: the LiveLogs port of `KubernetesBackend`.

`catchup-assets logs` reads one pod: `read_namespaced_pod_log` bounded by `tailLines` and
`limitBytes`, and with `--follow` one `follow=true` stream, read chunk by chunk as the kubelet
sends it, which the kubelet ends when the container stops. One operator's one stream is not the
dispatcher's reading (L30): it never follows, since a stream per pod for its whole life costs
a connection and its buffers per attempt in flight.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from kubernetes.client import ApiException, V1Pod

from catchup_assets.backends.kubernetes import names as n
from catchup_assets.backends.kubernetes.identity import JOB, KEPT, describe, pod_owner, worker_digest
from catchup_assets.backends.kubernetes.json_views import ModelView
from catchup_assets.core.dispatch.ports import LogUnavailable
from catchup_assets.core.measure.logparse import iter_lines

CHUNK = 64 * 1024
PENDING_POLL_SECONDS = 2.0  # following a pod not started yet: how often to look again


class PodLiveLog:
    """`read_log`, a part of `backend.KubernetesBackend` (its APIs, namespace, identity, _call, sleeper)."""

    def _attempt_pod(self, range_key: str, attempt: int):
        """The newest pod of the attempt's Job, if that Job is the mission's and the pod its (issue 45):
        an operator is never shown another's log under the attempt's name."""
        name = n.job_name(self.mission, range_key, attempt)
        try:
            job = json.loads(self._call(self.batch.read_namespaced_job, name, self.ns, read=True))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        if (why := self.identity.refusal(JOB, job)) is not None:
            raise LogUnavailable(f"{describe(JOB, job)} is not this mission's ({why}): its log is not the attempt's")
        job[KEPT] = {"worker": worker_digest(((job.get("spec") or {}).get("template") or {}).get("spec"))}
        body = self._call(self.core.list_namespaced_pod, self.ns, label_selector=f"job-name={name}", read=True)
        owned = [p for p in json.loads(body).get("items") or [] if pod_owner(p, {job["metadata"]["uid"]: job})]
        newest = max(owned, key=lambda p: p["metadata"].get("creationTimestamp") or "", default=None)
        return ModelView(newest, V1Pod) if newest is not None else None

    def read_log(
        self,
        range_key: str,
        attempt: int,
        follow: bool = False,
        tail_lines: int | None = None,
        limit_bytes: int | None = None,
    ) -> Iterator[str] | None:
        pod = self._attempt_pod(range_key, attempt)
        while pod is not None and pod.status is not None and pod.status.phase == "Pending":
            if not follow:
                why = next((c.message for c in pod.status.conditions or () if c.status == "False"), "") or ""
                raise LogUnavailable(f"pod {pod.metadata.name} is Pending, its container not started {why}".strip())
            self.sleeper(PENDING_POLL_SECONDS)
            pod = self._attempt_pod(range_key, attempt)
        if pod is None:
            return None  # its Job was released: its archive is the log
        kwargs = {"container": n.CONTAINER, "follow": follow, "_preload_content": False}
        if tail_lines is not None:
            kwargs["tail_lines"] = tail_lines
        if limit_bytes is not None:
            kwargs["limit_bytes"] = limit_bytes
        try:
            # A follow may be quiet for minutes: bound the connect, never the wait for its next line.
            resp = self.core.read_namespaced_pod_log(
                pod.metadata.name, self.ns, _request_timeout=(self.timeout, None) if follow else self.timeout, **kwargs
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise LogUnavailable(f"pod {pod.metadata.name}: HTTP {exc.status}: {exc.body or exc.reason}") from None
        return _lines(resp)


def _lines(resp) -> Iterator[str]:
    try:
        yield from iter_lines(resp.stream(CHUNK, decode_content=True))
    finally:
        resp.release_conn()
