"""Fault injection, request accounting and PATCH bodies for the simulated API.

Faults answer with the `Status` bodies the real API server sends, so the
code under test sees the same `ApiException.status`, `.reason` and, for 429,
the `Retry-After` header it will see in production. A hang stalls the
request past the client's timeout; by default the request then *still takes
effect*, as on a real server where the client gave up but etcd committed: a
timed-out create that really happened is what turns the retry into a 409.
"""

from __future__ import annotations

import copy
import random
import re
import threading
from collections import Counter, deque
from dataclasses import dataclass

from kubesim.kube_meta import ApiError

_TEMPLATES = {
    429: ("TooManyRequests", "Too many requests, please try again later."),
    500: ("InternalError", "Internal error occurred: etcdserver: leader changed"),
    503: ("ServiceUnavailable", "the server is currently unable to handle the request"),
    504: ("Timeout", "Timeout: request did not complete within requested timeout - context deadline exceeded"),
    410: ("Expired", "too old resource version: 1000 (2000)"),
    409: (
        "Conflict",
        "Operation cannot be fulfilled: the object has been modified; please "
        "apply your changes to the latest version and try again",
    ),
    403: ("Forbidden", 'forbidden: User "system:serviceaccount:sim:default" cannot perform this action'),
}


@dataclass
class Fault:
    """The next `count` requests matching every given criterion misbehave."""

    status: int | None = None  # answer with this code and its Status body
    hang: float = 0.0  # stall this many seconds first (beyond the client's timeout)
    apply: bool = True  # after a hang with no status: still perform the request?
    # Perform the request, promise the whole body (Content-Length), send half of it and
    # close: the client's read fails with urllib3's ProtocolError (IncompleteRead).
    truncate: bool = False
    # Close the connection without an answer (a reset): after performing the request if
    # `apply`, as when the server committed and the connection died on the way back.
    reset: bool = False
    # A watch: send the headers, then nothing for this many seconds before its first event,
    # as a busy apiserver's cacher does while it gathers a long backlog.
    slow_body: float = 0.0
    count: int = 1
    method: str | None = None  # HTTP method, e.g. "POST"
    path: str | None = None  # regex searched in the URL path
    verb: str | None = None  # API verb: create/get/list/delete/patch/update
    resource: str | None = None  # "jobs", "pods", "pods/log", "nodes"; a kubelet's: "nodes/stats"
    retry_after: int = 1
    # A 429 as API Priority and Fairness rejects a request: not a Status but Go's http.Error, text/plain
    # (apiserver/pkg/server/filters/priority-and-fairness.go calls maxinflight.go's tooManyRequests).
    apf: bool = False
    message: str | None = None
    hits: int = 0

    def matches(self, method: str, path: str, verb: str, resource: str) -> bool:
        return (
            (self.method is None or self.method.upper() == method)
            and (self.path is None or re.search(self.path, path) is not None)
            and (self.verb is None or self.verb == verb)
            and (self.resource is None or self.resource == resource)
        )

    def error(self) -> ApiError:
        reason, text = _TEMPLATES.get(self.status, ("Unknown", "injected failure"))
        details, headers = None, {}
        if self.status == 429:
            details = {"retryAfterSeconds": self.retry_after}
            headers = {"Retry-After": str(self.retry_after)}
        if self.apf:
            return ApiError(
                self.status, reason, text, None, headers, text="Too many requests, please try again later.\n"
            )
        return ApiError(self.status, reason, self.message or text, details, headers)


class FaultInjector:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[Fault] = []
        self._random: tuple[float, random.Random, float] | None = None
        self._without: frozenset[str] = frozenset()
        self.injected: Counter[str] = Counter()

    def add(self, status: int | None = None, *, count: int = 1, **criteria) -> Fault:
        fault = Fault(status=status, count=count, **criteria)
        if fault.status is None and not (fault.hang or fault.truncate or fault.reset or fault.slow_body):
            raise ValueError("a fault needs a status, a hang, a truncation, a reset or a slow body")
        with self._lock:
            self._rules.append(fault)
        return fault

    def at_random(self, rate: float, seed: int, timeout_hang: float, without: tuple[str, ...] = ()) -> Counter[str]:
        """From now on each request misbehaves with probability `rate`, in one of the ways a
        real API server and network do (less the kinds `without` names, e.g. "status 410" in
        front of a real server whose etcd is compacted); returns the running count of injected kinds."""
        self._random = (rate, random.Random(seed), timeout_hang)
        self._without = frozenset(without)
        return self.injected

    def _draw(self, verb: str) -> Fault | None:
        rate, rng, hang = self._random
        if rng.random() >= rate:
            return None
        kinds = [
            *(f"status {c}" for c in (429, 500, 503, 504)),
            "reset before",
            "reset after",  # committed, then the connection died: a retried create meets 409
            "timeout",  # stalled past the client's timeout, then committed
        ]
        if verb in ("get", "list", "watch"):
            kinds.append("cut-off body")  # a watch cut off after its first event (kube_api._watch)
        if verb in ("list", "delete", "watch"):
            kinds.append("status 410")
        kind = rng.choice([k for k in kinds if k not in self._without])
        self.injected[kind] += 1
        if kind.startswith("status"):
            # urllib3 itself retries a 429/503 that carries Retry-After, sleeping that long in
            # real time; 0 takes the same path without the wait.
            return Fault(status=int(kind.split()[1]), retry_after=0)
        if kind == "cut-off body":
            return Fault(truncate=True)
        if kind == "timeout":
            return Fault(hang=hang)
        return Fault(reset=True, apply=kind == "reset after")

    def take(self, method: str, path: str, verb: str, resource: str) -> Fault | None:
        """The first armed fault matching this request, spending one of its uses."""
        with self._lock:
            for fault in self._rules:
                if fault.hits < fault.count and fault.matches(method, path, verb, resource):
                    fault.hits += 1
                    return fault
            if self._random is not None:
                return self._draw(verb)
        return None

    def pending(self) -> int:
        with self._lock:
            return sum(f.count - f.hits for f in self._rules)

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()


class RequestLog:
    """Requests per (verb, resource), as the API server's own metrics count them."""

    def __init__(self, keep: int = 10_000) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[tuple[str, str]] = Counter()
        self.recent: deque[tuple[str, str, str, str, int]] = deque(maxlen=keep)

    def record(self, verb: str, resource: str) -> None:
        # Counted on arrival, so a request still hanging is already counted.
        with self._lock:
            self._counts[(verb, resource)] += 1

    def answered(self, method: str, path: str, verb: str, resource: str, code: int) -> None:
        with self._lock:
            self.recent.append((method, path, verb, resource, code))

    def count(self, verb: str | None = None, resource: str | None = None) -> int:
        with self._lock:
            return sum(
                n
                for (v, r), n in self._counts.items()
                if (verb is None or v == verb) and (resource is None or r == resource)
            )

    @property
    def total(self) -> int:
        return self.count()

    def snapshot(self) -> dict[tuple[str, str], int]:
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self.recent.clear()


def apply_patch(obj: dict, patch, content_type: str) -> dict:
    """JSON patch (a list of ops) or merge patch; strategic merge is treated as merge."""
    if "json-patch" in content_type or isinstance(patch, list):
        return _json_patch(obj, patch)
    return _merge(obj, patch)


def _merge(target, patch):
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def _json_patch(obj: dict, ops: list) -> dict:
    doc = copy.deepcopy(obj)
    for op in ops:
        parts = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        parent = doc
        for part in parts[:-1]:
            parent = parent[int(part)] if isinstance(parent, list) else parent.setdefault(part, {})
        last = parts[-1]
        kind = op["op"]
        if isinstance(parent, list):
            index = len(parent) if last == "-" else int(last)
            if kind == "add":
                parent.insert(index, op["value"])
            elif kind == "replace":
                parent[index] = op["value"]
            elif kind == "remove":
                del parent[index]
        elif kind in ("add", "replace"):
            parent[last] = op["value"]
        elif kind == "remove":
            if last not in parent:
                raise ApiError(
                    422,
                    "Invalid",
                    f"the server rejected our request due to an "
                    f"error in our request: remove of missing path {op['path']}",
                )
            del parent[last]
        elif kind == "test" and parent.get(last) != op.get("value"):
            raise ApiError(422, "Invalid", f"the server rejected our request: test failed at {op['path']}")
    return doc
