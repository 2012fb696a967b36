"""What a request to the simulated API server is, in the server's own terms.

Its route: verb, resource and subresource, namespace and name, refused as the
real server refuses a path or a method it does not serve; and the media types
it may be answered in (content negotiation).
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from kubesim.kube_meta import TRUE, ApiError
from kubesim.kube_resources import RESOURCES

_NO_ROUTE = ApiError(404, "NotFound", "the server could not find the requested resource")
_PATH = re.compile(
    r"^/(api/v1|apis/batch/v1)(?:/namespaces/([^/]+))?/([^/]+)"
    r"(?:/([^/]+)(?:/([^/]+)(?:/(.*))?)?)?$"
)


# Content negotiation, as kube-apiserver v1.37.2 answers it (measured on the real one, tests/k8s): the
# serializers' media types; go-restful refuses an Accept no route produces, and for pods/log, whose route
# also produces text/plain, the handler's own negotiation (apiserver handlers/negotiation/negotiate.go
# NegotiateOutputMediaType, errors.go) refuses one its serializers cannot write, `text/plain` included.
_SERIALIZED = ("application/json", "application/yaml", "application/vnd.kubernetes.protobuf")
_ACCEPTABLE = frozenset({"*/*", *_SERIALIZED})
_STREAMS = ("application/json;stream=watch", "application/vnd.kubernetes.protobuf;stream=watch")
_PRODUCES = ", ".join([*_SERIALIZED, *_STREAMS])
_LOG_PRODUCES = ", ".join(["text/plain", *_SERIALIZED])


def negotiate(accept: str | None, resource: str) -> None:
    """Raise the real server's 406 for an Accept it cannot answer (none given: any)."""
    ranges = [part.split(";")[0].strip().lower() for part in (accept or "").split(",") if part.strip()]
    if not ranges or any(r in _ACCEPTABLE for r in ranges):
        return
    if resource == "pods/log" and "text/plain" in ranges:
        raise ApiError(406, "NotAcceptable", f"only the following media types are accepted: {', '.join(_SERIALIZED)}")
    produces = _LOG_PRODUCES if resource == "pods/log" else _PRODUCES
    raise ApiError(406, "NotAcceptable", f"406: Not Acceptable\n\nAvailable representations: {produces}", {})


class Route:
    """What a request is, in the API server's own terms (verb, resource...)."""

    def __init__(self, method: str, path: str, query: dict[str, str]) -> None:
        m = _PATH.match(path)
        if not m:
            raise _NO_ROUTE
        prefix, self.ns, plural, name, sub, rest = m.groups()
        res = RESOURCES.get(plural)
        if res is None or (prefix == "apis/batch/v1") != (res.group == "batch"):
            raise _NO_ROUTE
        if self.ns is not None and not res.namespaced:
            raise _NO_ROUTE
        self.plural, self.name, self.sub = plural, name and unquote(name), sub
        if rest:
            raise _NO_ROUTE  # nothing served lies below a subresource
        self.resource = f"{plural}/{sub}" if sub else plural
        if sub not in (None, "log", "status") or (sub == "log" and plural != "pods"):
            raise _NO_ROUTE
        if sub == "log" and method != "GET":
            raise ApiError(405, "MethodNotAllowed", f"the simulated server only serves GET on {plural}/{sub}")
        if name is None:
            if method == "GET":
                self.verb = "watch" if query.get("watch") in TRUE else "list"
            else:
                self.verb = {"POST": "create", "DELETE": "deletecollection"}.get(method, "")
        else:
            self.verb = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, "")
        if not self.verb:
            raise ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
