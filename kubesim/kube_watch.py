"""Watch, as the Kubernetes API reference describes it (issue 26 item 2).

Source: https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes
and #watch-bookmarks. A GET with `?watch=1&resourceVersion=N` streams every change
after N as newline-delimited JSON `{"type": ADDED|MODIFIED|DELETED|BOOKMARK|ERROR,
"object": ...}`, honouring `labelSelector`/`fieldSelector`, until `timeoutSeconds`.
A BOOKMARK object carries only its kind, apiVersion and `metadata.resourceVersion`
(the `k8s.io/initial-events-end` annotation only with `sendInitialEvents`, which this
server does not serve). A resourceVersion older than the server's window is answered
with an ERROR event whose object is a `Status` of code 410, reason Expired, as the
watch cache does (k8s.io/apiserver pkg/storage/cacher/watch_cache.go,
`errors.NewResourceExpired("too old resource version: %d (%d)")`).

The store records each write here (`Store.bump`), encoded once, so a watch serves
bytes rather than re-encoding objects; `history` bounds the window as etcd compaction
does, and `compact()` empties it, so every older resourceVersion is then Expired.
"""

from __future__ import annotations

import bisect
import json
import threading
import time
from dataclasses import dataclass

from kubesim.kube_meta import TRUE, field_matcher, label_matcher

# The watch cache sends a bookmark about once a minute (cacher.go, bookmarkFrequency);
# the simulated server is configurable, as tests run in seconds.
BOOKMARK_SECONDS = 1.0
DEFAULT_TIMEOUT = 1800.0  # the server's default minRequestTimeout, 1800 s
# The apiserver writes and flushes each event as it comes off the cacher's channel
# (k8s.io/apiserver pkg/endpoints/handlers/watch.go, `serveWatch`: `e.Encode` then
# `flusher.Flush()` per event), so a client sees a backlog's first events at once.
# The simulated server flushes every CHUNK_EVENTS lines: the same bytes, fewer writes.
CHUNK_EVENTS = 256


@dataclass(frozen=True)
class Change:
    rv: int
    plural: str
    namespace: str
    type: str  # ADDED / MODIFIED / DELETED
    labels: dict
    encoded: bytes  # the object's JSON as written (decoded again only for a fieldSelector)


class WatchLog:
    """Every write's event, in resourceVersion order, within a bounded window.

    Found by binary search, as the watch cache's ring buffer is (watch_cache.go,
    `getAllEventsSinceLocked`: `sort.Search` over the buffer), so a watch from far
    back answers as fast as one from near the head.
    """

    def __init__(self, lock: threading.RLock, history: int = 200_000) -> None:
        self.changed = threading.Condition(lock)
        self.history = history
        self._events: list[Change] = []
        self._rvs: list[int] = []
        self._compacted_to = 0  # every rv at or below this is gone from the window

    def record(self, plural: str, obj: dict, type_: str) -> None:
        meta = obj["metadata"]
        encoded = json.dumps(obj, separators=(",", ":")).encode()
        with self.changed:
            change = Change(
                int(meta["resourceVersion"]),
                plural,
                meta.get("namespace", ""),
                type_,
                dict(meta.get("labels") or {}),
                encoded,
            )
            self._events.append(change)
            self._rvs.append(change.rv)
            if len(self._events) > self.history + self.history // 4:  # trimmed in steps, not each write
                self._drop(len(self._events) - self.history)
            self.changed.notify_all()

    def _drop(self, n: int) -> None:
        self._compacted_to = max(self._compacted_to, self._rvs[n - 1])
        del self._events[:n], self._rvs[:n]

    def compact(self, upto: int) -> None:
        """Forget every event at or below `upto`, as etcd compaction does."""
        with self.changed:
            n = bisect.bisect_right(self._rvs, upto)
            if n:
                self._drop(n)
            self._compacted_to = max(self._compacted_to, upto)

    def since(self, rv: int) -> list[Change] | None:
        """Events after `rv`, or None when `rv` is older than the window (410 Expired)."""
        if rv < self._compacted_to:
            return None
        return self._events[bisect.bisect_right(self._rvs, rv) :]


def expired(asked: int, oldest: int) -> dict:
    return {
        "type": "ERROR",
        "object": {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": f"too old resource version: {asked} ({oldest})",
            "reason": "Expired",
            "code": 410,
        },
    }


def _line(type_: str, encoded: bytes) -> bytes:
    return b'{"type":"' + type_.encode() + b'","object":' + encoded + b"}\n"


def watch_lines(store, res, ns: str | None, query: dict, stopping: threading.Event, cut_after: int | None = None):
    """The body of one watch, chunk by chunk (each chunk whole lines); ends at timeoutSeconds.

    `cut_after`: a fault; stop after that many events without ending the stream cleanly
    (the caller drops the connection), as a proxy or a dying apiserver cuts a watch.
    """
    labels_ok = label_matcher(query.get("labelSelector"))
    fields_ok = field_matcher(res.plural, query.get("fieldSelector"))
    by_field = bool(query.get("fieldSelector"))
    bookmarks = query.get("allowWatchBookmarks") in TRUE
    timeout = float(query.get("timeoutSeconds") or DEFAULT_TIMEOUT)
    deadline = time.monotonic() + timeout
    log: WatchLog = store.watch
    sent = 0
    with log.changed:
        asked = query.get("resourceVersion") or "0"
        if asked in ("", "0"):
            # "Any"/unset: a synthetic ADDED per current object, then changes (the reference's
            # "Start at most recent" semantics for watch without a resourceVersion).
            rv = int(store.resource_version)
            first = [
                _line("ADDED", json.dumps(o, separators=(",", ":")).encode())
                for o in store.select(res.plural, ns, query.get("labelSelector"), query.get("fieldSelector"))
            ]
        else:
            rv, first = int(asked), []
    if first:
        yield b"".join(first)
        sent += len(first)
    next_bookmark = time.monotonic() + BOOKMARK_SECONDS
    while not stopping.is_set():
        with log.changed:
            changes = log.since(rv)
            if changes is None:
                yield (json.dumps(expired(rv, log._compacted_to + 1)) + "\n").encode()
                return
            if not changes:
                now = time.monotonic()
                log.changed.wait(max(0.0, min(deadline, next_bookmark) - now))
                changes = log.since(rv) or []
            current = store.resource_version
        out = []
        for c in changes:
            rv = c.rv
            if (ns and c.namespace != ns) or c.plural != res.plural:
                continue
            if labels_ok(c.labels) and (not by_field or fields_ok(json.loads(c.encoded))):
                out.append(_line(c.type, c.encoded))
                sent += 1
                if cut_after is not None and sent >= cut_after:
                    yield b"".join(out)
                    return
                if len(out) >= CHUNK_EVENTS:  # a long backlog streams as it is read
                    yield b"".join(out)
                    out = []
        now = time.monotonic()
        if bookmarks and (now >= next_bookmark or now >= deadline):
            mark = {"kind": res.kind, "apiVersion": res.api_version, "metadata": {"resourceVersion": current}}
            out.append(_line("BOOKMARK", json.dumps(mark, separators=(",", ":")).encode()))
            rv = max(rv, int(current))
            next_bookmark = now + BOOKMARK_SECONDS
        if out:
            yield b"".join(out)
        if now >= deadline:
            return
