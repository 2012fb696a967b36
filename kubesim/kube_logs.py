"""Container logs as the kubelet keeps and serves them.

The container runtime splits output on `\\n` only and cuts a longer line into
16 KiB partial entries (containerd's `max_container_log_line_size`), each
with its own timestamp. So a carriage-return progress meter is one huge
"line", and with `timestamps=true` a timestamp appears every 16 KiB inside
it: exactly the input that must not kill a reader (L29). The read path
follows the kubelet: `tailLines` picks entries first, then `sinceTime`
keeps entries stamped at or after it (inclusive, whole seconds once the API
server has forwarded it), then `limitBytes` cuts the bytes. With `follow=true`
the answer is a chunked stream (`FollowedLog`): what is there, then each new
entry as the kubelet writes it, until the container instance is no longer
running (or the pod is gone) or `limitBytes` bytes were sent, as the kubelet's
own follow does. Sources: the parameters are the Pod v1 API reference's "read log"
(https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#read-log-of-the-specified-pod);
the order of tailLines, sinceTime and limitBytes and the end of a follow are the kubelet's
(kubernetes/kubernetes pkg/kubelet/kuberuntime/logs/logs.go, ReadLogs).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from kubesim.kube_meta import TRUE, ApiError, not_found, parse_rfc3339, rfc3339_nano

MAX_ENTRY = 16 * 1024


@dataclass(frozen=True)
class Entry:
    t: float
    data: bytes
    partial: bool


class PodLogs:
    """Log entries per (namespace, pod, container, container instance)."""

    def __init__(self) -> None:
        self._logs: dict[tuple[str, str, str, int], list[Entry]] = {}

    def write(self, ns: str, pod: str, container: str, instance: int, t: float, line: str | bytes) -> None:
        data = line.encode() if isinstance(line, str) else line
        out = self._logs.setdefault((ns, pod, container, instance), [])
        while len(data) > MAX_ENTRY:
            out.append(Entry(t, data[:MAX_ENTRY], True))
            data = data[MAX_ENTRY:]
        out.append(Entry(t, data, False))

    def entries(self, ns: str, pod: str, container: str, instance: int) -> list[Entry]:
        return self._logs.get((ns, pod, container, instance), [])

    def drop(self, ns: str, pod: str) -> None:
        for key in [k for k in self._logs if k[0] == ns and k[1] == pod]:
            del self._logs[key]


def render(
    entries: list[Entry],
    since: float | None = None,
    tail: int | None = None,
    timestamps: bool = False,
    limit_bytes: int | None = None,
) -> bytes:
    if tail is not None and tail >= 0:
        entries = entries[len(entries) - tail :] if tail else []
    parts, size = [], 0
    for e in entries:
        if since is not None and e.t < since:
            continue
        chunk = (rfc3339_nano(e.t).encode() + b" " if timestamps else b"") + e.data + (b"" if e.partial else b"\n")
        parts.append(chunk)
        size += len(chunk)
        if limit_bytes is not None and size >= limit_bytes:
            break
    body = b"".join(parts)
    return body[:limit_bytes] if limit_bytes is not None else body


def _waiting_message(container: str, pod: str, reason: str) -> str:
    head = f'container "{container}" in pod "{pod}" is waiting to start'
    if reason == "ErrImagePull":
        return f"{head}: image can't be pulled"
    if reason == "ImagePullBackOff":
        return f"{head}: trying and failing to pull image"
    return f"{head}: {reason}"


def _int_param(query: Mapping[str, str], key: str) -> int | None:
    if key not in query:
        return None
    try:
        return int(query[key])
    except ValueError:
        raise ApiError(400, "BadRequest", f'invalid value "{query[key]}" for {key}') from None


def _instance(status: dict | None, container: str, pod: str, previous: bool) -> int:
    """Which run of the container to read, by the kubelet's rules."""
    if status is None:
        raise ApiError(400, "BadRequest", _waiting_message(container, pod, "ContainerCreating"))
    restarts = status.get("restartCount", 0)
    state, last = status.get("state") or {}, (status.get("lastState") or {}).get("terminated")
    if previous:
        if not last:
            raise ApiError(400, "BadRequest", f'previous terminated container "{container}" in pod "{pod}" not found')
        return restarts - 1
    if "running" in state:
        return restarts
    if "terminated" in state:
        if status.get("containerID"):
            return restarts
        if last:
            return restarts - 1
        raise ApiError(400, "BadRequest", f'container "{container}" in pod "{pod}" is terminated')
    if last:
        return restarts - 1
    reason = (state.get("waiting") or {}).get("reason", "ContainerCreating")
    raise ApiError(400, "BadRequest", _waiting_message(container, pod, reason))


def serve_log(store, ns: str, name: str, query: Mapping[str, str]) -> bytes:
    """GET pods/{name}/log; the caller holds the store lock."""
    pod = store.live("pods", ns, name)
    if pod is None:
        raise not_found("pods", "", name)
    names = [c["name"] for c in pod["spec"]["containers"]]
    container = query.get("container")
    if not container:
        if len(names) != 1:
            raise ApiError(
                400,
                "BadRequest",
                f"a container name must be specified for pod {name}, choose one of: [{' '.join(names)}]",
            )
        container = names[0]
    elif container not in names:
        raise ApiError(400, "BadRequest", f"container {container} is not valid for pod {name}")
    node = pod["spec"].get("nodeName")
    if not node:
        return b""  # the API server has no kubelet to ask yet: an empty 200
    if store.live("nodes", None, node) is None:
        raise not_found("nodes", "", node)
    status = next((s for s in pod.get("status", {}).get("containerStatuses") or [] if s["name"] == container), None)
    instance = _instance(status, container, name, query.get("previous") in TRUE)
    since = None
    if query.get("sinceTime"):
        if query.get("sinceSeconds"):
            raise ApiError(422, "Invalid", "at most one of `sinceTime` or `sinceSeconds` may be specified")
        # The API server forwards sinceTime to the kubelet formatted as RFC3339: whole seconds.
        since = float(int(parse_rfc3339(query["sinceTime"])))
    elif query.get("sinceSeconds"):
        since = store.clock() - (_int_param(query, "sinceSeconds") or 0)
    args = dict(
        since=since,
        tail=_int_param(query, "tailLines"),
        timestamps=query.get("timestamps") in TRUE,
        limit_bytes=_int_param(query, "limitBytes"),
    )
    if query.get("follow") in TRUE:
        return FollowedLog(ns, name, container, instance, pod["metadata"].get("uid"), **args)
    return render(store.logs.entries(ns, name, container, instance), **args)


@dataclass(frozen=True)
class FollowedLog:
    """A `follow=true` read, validated under the store lock and streamed outside it (kube_api.py)."""

    ns: str
    pod: str
    container: str
    instance: int
    uid: str | None
    since: float | None
    tail: int | None
    timestamps: bool
    limit_bytes: int | None

    def _running(self, store) -> bool:
        pod = store.live("pods", self.ns, self.pod)
        if pod is None or pod["metadata"].get("uid") != self.uid:
            return False
        statuses = pod.get("status", {}).get("containerStatuses") or []
        status = next((s for s in statuses if s["name"] == self.container), None)
        return (
            bool(status) and "running" in (status.get("state") or {}) and status.get("restartCount", 0) == self.instance
        )

    def chunks(self, store, stopping: threading.Event, poll: float = 0.02) -> Iterator[bytes]:
        start: int | None = None
        sent = 0
        while True:
            with store.lock:  # the entries and whether more can come, seen at one instant
                entries = list(store.logs.entries(self.ns, self.pod, self.container, self.instance))
                running = self._running(store)
            if start is None:  # tailLines picks the first entries sent, then everything new
                start = max(0, len(entries) - self.tail) if self.tail is not None and self.tail >= 0 else 0
            new, start = entries[start:], len(entries)
            left = None if self.limit_bytes is None else self.limit_bytes - sent
            body = render(new, since=self.since, timestamps=self.timestamps, limit_bytes=left) if new else b""
            if body:
                sent += len(body)
                yield body
            if (left is not None and sent >= self.limit_bytes) or not running or stopping.wait(poll):
                return


def stream_chunked(wfile, chunks: Iterator[bytes]) -> None:
    """Write `chunks` as an HTTP/1.1 chunked body, each flushed as it comes."""
    for chunk in chunks:
        wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
        wfile.flush()
    wfile.write(b"0\r\n\r\n")
    wfile.flush()
