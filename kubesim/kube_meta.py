"""Shared vocabulary of the simulated cluster: clock, times, errors, selectors.

Everything here mirrors what the real API server puts on the wire, because
the code under test parses those shapes: `metav1.Time` is RFC3339 with
*second* granularity (so durations computed from pod timestamps are whole
seconds, L23), errors are `Status` objects with a `reason` the client turns
into `ApiException.status`, and selectors fail with the same 400 messages.
"""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime

# strconv.ParseBool's spellings: the Python client sends booleans as "True".
TRUE = frozenset({"1", "t", "T", "true", "TRUE", "True"})

# A fixed epoch keeps every test's timestamps reproducible.
DEFAULT_EPOCH = datetime(2024, 1, 1, tzinfo=UTC).timestamp()


class ManualClock:
    """`now()` for the simulation: time moves only when a test says so."""

    def __init__(self, start: float = DEFAULT_EPOCH) -> None:
        self._t = float(start)
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self._t

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("time does not run backwards")
        with self._lock:
            self._t += seconds
            return self._t


def rfc3339(t: float) -> str:
    """metav1.Time: whole seconds, UTC, 'Z'."""
    return datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def rfc3339_nano(t: float) -> str:
    """The kubelet's log timestamp: always nine fractional digits."""
    # A float epoch holds microseconds exactly enough; finer digits would be noise.
    micros = round(t * 1_000_000)
    whole, frac = divmod(micros, 1_000_000)
    stamp = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{frac * 1000:09d}Z"


def parse_rfc3339(text: str) -> float:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise ApiError(
            400, "BadRequest", f'parsing time "{text}" as "2006-01-02T15:04:05Z07:00": cannot parse'
        ) from None


class ApiError(Exception):
    """An answer other than success, rendered as the API server's `Status`."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict | None = None,
        headers: dict | None = None,
        text: str | None = None,
    ) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.headers = details, headers or {}
        self.text = text  # answered as this text/plain body instead of a Status (a filter's http.Error)

    def status(self) -> dict:
        body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def not_found(resource: str, group: str, name: str) -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        404, "NotFound", f'{qualified} "{name}" not found', {"name": name, "group": group, "kind": resource}
    )


def already_exists(resource: str, group: str, name: str) -> ApiError:
    qualified = f"{resource}.{group}" if group else resource
    return ApiError(
        409, "AlreadyExists", f'{qualified} "{name}" already exists', {"name": name, "group": group, "kind": resource}
    )


def invalid(kind: str, group: str, name: str, causes: list[tuple[str, str]]) -> ApiError:
    qualified = f"{kind}.{group}" if group else kind
    text = "; ".join(f"{field}: {msg}" for field, msg in causes)
    return ApiError(
        422,
        "Invalid",
        f'{qualified} "{name}" is invalid: {text}',
        {
            "name": name,
            "group": group,
            "kind": kind,
            "causes": [{"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes],
        },
    )


_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def name_problems(name: str, max_len: int = 253) -> list[str]:
    if not name:
        return ["Required value: name or generateName is required"]
    out = []
    if len(name) > max_len:
        out.append(f'Invalid value: "{name}": must be no more than {max_len} characters')
    if not _DNS_SUBDOMAIN.match(name):
        out.append(
            f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of '
            "lower case alphanumeric characters, '-' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'example.com', regex used for "
            "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
            "[a-z0-9])?)*')"
        )
    return out


def label_problems(labels: dict | None, field: str) -> list[tuple[str, str]]:
    out = []
    for key, value in (labels or {}).items():
        prefix, _, name = key.rpartition("/")
        if (prefix and not _DNS_SUBDOMAIN.match(prefix)) or len(name) > 63 or not _LABEL_NAME.match(name):
            out.append(
                (field, f"Invalid value: \"{key}\": name part must consist of alphanumeric characters, '-', '_' or '.'")
            )
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            out.append(
                (
                    f"{field}",
                    f'Invalid value: "{value}": must be no more than 63 '
                    "characters and consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
    return out


# --- selectors --------------------------------------------------------------


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses: `a in (x,y),b` is two terms."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    return [p.strip() for p in parts if p.strip()]


_SET_TERM = re.compile(r"^(\S+)\s+(in|notin)\s+\(([^)]*)\)$")
_EQ_TERM = re.compile(r"^([^=!\s]+)\s*(==|=|!=)\s*(\S*)$")


def label_matcher(selector: str | None):
    """`labelSelector` as the API server parses it; returns labels -> bool."""
    if not selector:
        return lambda labels: True
    tests = []
    for term in _split_top(selector):
        if m := _SET_TERM.match(term):
            key, op, raw = m.groups()
            values = {v.strip() for v in raw.split(",") if v.strip()}
            if op == "in":
                tests.append(lambda lb, k=key, vs=values: lb.get(k) in vs)
            else:
                tests.append(lambda lb, k=key, vs=values: lb.get(k) not in vs)
        elif m := _EQ_TERM.match(term):
            key, op, value = m.groups()
            if op == "!=":
                tests.append(lambda lb, k=key, v=value: lb.get(k) != v)
            else:
                tests.append(lambda lb, k=key, v=value: lb.get(k) == v)
        elif term.startswith("!") and _LABEL_NAME.match(term[1:].split("/")[-1] or "-"):
            tests.append(lambda lb, k=term[1:]: k not in lb)
        elif _LABEL_NAME.match(term.split("/")[-1]) and " " not in term:
            tests.append(lambda lb, k=term: k in lb)
        else:
            raise ApiError(
                400,
                "BadRequest",
                f"unable to parse requirement: found '{term}', expected: in, notin, =, ==, !=, gt, lt",
            )
    return lambda labels: all(t(labels or {}) for t in tests)


# Fields each resource lets `fieldSelector` use (a subset of the real lists).
FIELD_PATHS: dict[str, dict[str, tuple[str, ...]]] = {
    "pods": {
        "spec.nodeName": ("spec", "nodeName"),
        "status.phase": ("status", "phase"),
        "spec.restartPolicy": ("spec", "restartPolicy"),
        "status.podIP": ("status", "podIP"),
    },
    "jobs": {"status.successful": ("status", "succeeded")},
    "events": {
        "involvedObject.name": ("involvedObject", "name"),
        "involvedObject.kind": ("involvedObject", "kind"),
        "involvedObject.uid": ("involvedObject", "uid"),
        "reason": ("reason",),
        "type": ("type",),
    },
}


def _dig(obj: dict, path: tuple[str, ...]) -> str:
    for part in path:
        obj = obj.get(part) if isinstance(obj, dict) else None
    return "" if obj is None else str(obj)


def field_matcher(resource: str, selector: str | None):
    if not selector:
        return lambda obj: True
    known = {
        "metadata.name": ("metadata", "name"),
        "metadata.namespace": ("metadata", "namespace"),
        **FIELD_PATHS.get(resource, {}),
    }
    tests = []
    for term in _split_top(selector):
        m = _EQ_TERM.match(term)
        if not m:
            raise ApiError(400, "BadRequest", f"invalid selector: '{selector}'; can't understand '{term}'")
        key, op, value = m.groups()
        if key not in known:
            raise ApiError(400, "BadRequest", f"field label not supported: {key}")
        path = known[key]
        if op == "!=":
            tests.append(lambda o, p=path, v=value: _dig(o, p) != v)
        else:
            tests.append(lambda o, p=path, v=value: _dig(o, p) == v)
    return lambda obj: all(t(obj) for t in tests)


def set_condition(
    obj: dict, kind: str, status: str, t: float, reason: str | None = None, message: str | None = None
) -> None:
    """Set a condition; lastTransitionTime moves only when the status changes."""
    conds = obj["status"].setdefault("conditions", [])
    cond = next((c for c in conds if c["type"] == kind), None)
    if cond is None:
        cond = {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": rfc3339(t)}
        conds.append(cond)
    elif cond["status"] != status:
        cond["status"], cond["lastTransitionTime"] = status, rfc3339(t)
    for key, value in (("reason", reason), ("message", message)):
        if value is None:
            cond.pop(key, None)
        else:
            cond[key] = value
