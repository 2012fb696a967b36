"""An in-process Kubernetes API server that speaks the real REST protocol.

Why our own server and not `kmock`: the backend's hot path is LISTs by label
selector and a create per attempt. kmock ignores `labelSelector` (every
filter would be re-added through its reactions) and costs ~12 ms per create;
a stdlib `ThreadingHTTPServer` on 127.0.0.1 with keep-alive costs well under
a millisecond per request, needs no new dependency, and lets us add what kmock
does not model: pod logs with `sinceTime` and `follow`, fault injection and per-verb
request accounting. The kubelets' `/stats/summary` is served by the kubelets
themselves (kubelet_server.py), as the backend reads it; the node proxy is
not served.

Start it as a context manager; the official client talks to it unmodified:

    with KubeApiServer() as api:
        batch = kubernetes.client.BatchV1Api(api.api_client)
        batch.create_namespaced_job("ns", manifest)
        api.store.list("pods", "ns", "job-name=x")      # what the server holds
        api.requests.count("list", "pods")                # what it received
        api.faults.add(status=429, verb="list", resource="jobs", count=2)

Pods only move when a `kubesim.kubelet.Kubelet` steps the store.
Watches are served as the API reference describes them (kube_watch.py).
Not modeled: dry runs, namespace lifecycle (every namespace exists:
a GET of one never created answers it bare, kube_store.implicit_namespace),
authn/authz, server-side apply, graceful pod deletion (a DELETE
removes a pod at once; Jobs keep batch/v1's orphaning default).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, unquote, urlsplit

from kubesim.kube_faults import FaultInjector, RequestLog, apply_patch
from kubesim.kube_logs import FollowedLog, serve_log, stream_chunked
from kubesim.kube_meta import TRUE, ApiError, ManualClock, not_found
from kubesim.kube_store import RESOURCES, Store, implicit_namespace
from kubesim.kube_watch import watch_lines

_NO_ROUTE = ApiError(404, "NotFound", "the server could not find the requested resource")
_PATH = re.compile(
    r"^/(api/v1|apis/batch/v1)(?:/namespaces/([^/]+))?/([^/]+)"
    r"(?:/([^/]+)(?:/([^/]+)(?:/(.*))?)?)?$"
)
VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-catchup-sim", "platform": "linux/amd64"}


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


class KubeApiServer:
    def __init__(
        self, store: Store | None = None, clock: Callable[[], float] | None = None, latency: float = 0.0
    ) -> None:
        self.store = store or Store(clock or ManualClock())
        self.clock = self.store.clock
        self.faults = FaultInjector()
        self.requests = RequestLog()
        self.latency = latency  # seconds added to every answer, for benchmarks
        self._stopping = threading.Event()
        self._idle = threading.Condition()
        self._inflight = 0
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.api_client = None

    # --- lifecycle ---------------------------------------------------------------

    @property
    def host(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def configuration(self):
        import kubernetes.client

        cfg = kubernetes.client.Configuration()
        cfg.host = self.host
        return cfg

    def start(self) -> KubeApiServer:
        import kubernetes.client

        handler = type("Handler", (_Handler,), {"api": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="sim-kube-api", daemon=True
        )
        self._thread.start()
        self.api_client = kubernetes.client.ApiClient(self.configuration())
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases hung requests
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self.api_client is not None:
            self.api_client.close()

    def __enter__(self) -> KubeApiServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- request handling -------------------------------------------------------------

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Wait until no request is being served (e.g. a hung one has landed)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._inflight == 0, timeout)

    def handle(self, h: _Handler, method: str) -> None:
        with self._idle:
            self._inflight += 1
        try:
            self._handle(h, method)
        finally:
            with self._idle:
                self._inflight -= 1
                self._idle.notify_all()

    def _handle(self, h: _Handler, method: str) -> None:
        url = urlsplit(h.path)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        length = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(length) if length else b""
        verb = resource = "?"
        headers: dict[str, str] = {}
        truncate, slow_body = False, 0.0
        try:
            if url.path == "/version":
                verb, resource = "get", "version"
                self.requests.record(verb, resource)
                code, body = 200, VERSION
            else:
                route = Route(method, url.path, query)
                verb, resource = route.verb, route.resource
                self.requests.record(verb, resource)
                fault = self.faults.take(method, url.path, verb, resource)
                if fault is not None:
                    truncate, slow_body = fault.truncate, fault.slow_body
                    if fault.hang and self._stopping.wait(fault.hang):
                        return
                    if fault.status is not None:
                        raise fault.error()
                    if not fault.apply:
                        h.close_connection = True
                        return
                    if fault.reset:
                        with self.store.lock:
                            self._dispatch(route, query, raw, h.headers)
                        h.close_connection = True  # committed; the answer never leaves
                        return
                negotiate(h.headers.get("Accept"), resource)
                if self.latency:
                    time.sleep(self.latency)
                if verb == "watch":
                    self._watch(h, route, query, cut_after=1 if truncate else None, slow_body=slow_body)
                    return
                with self.store.lock:
                    code, body = self._dispatch(route, query, raw, h.headers)
        except ApiError as exc:
            code, body, headers = exc.code, exc.status(), exc.headers
        self.requests.answered(method, url.path, verb, resource, code)
        if isinstance(body, FollowedLog):  # follow=true: streamed as the kubelet writes, outside the lock
            self._follow(h, body)
            return
        if isinstance(body, bytes):
            payload, ctype = body, "text/plain"
        else:
            payload, ctype = json.dumps(body, separators=(",", ":")).encode(), "application/json"
        try:
            h.send_response(code)
            h.send_header("Content-Type", ctype)
            h.send_header("Content-Length", str(len(payload)))
            for key, value in headers.items():
                h.send_header(key, value)
            h.end_headers()
            if truncate:  # the body cut off mid-read, the connection gone
                h.wfile.write(payload[: len(payload) // 2])
                h.wfile.flush()
                h.close_connection = True
                return
            h.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True  # the client gave up (a timeout test)

    def _follow(self, h: _Handler, followed: FollowedLog) -> None:
        try:
            h.send_response(200)
            h.send_header("Content-Type", "text/plain")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            stream_chunked(h.wfile, followed.chunks(self.store, self._stopping))
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True  # the reader went away: its follow ends

    def _watch(self, h: _Handler, r: Route, query: dict, cut_after: int | None, slow_body: float = 0.0) -> None:
        """A watch streams outside the store's lock; a cut-off one ends without its last chunk."""
        self.requests.answered("GET", h.path, "watch", r.resource, 200)
        lines = watch_lines(self.store, RESOURCES[r.plural], r.ns, query, self._stopping, cut_after)
        try:
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Transfer-Encoding", "chunked")
            h.end_headers()
            if slow_body:
                h.wfile.flush()
                self._stopping.wait(slow_body)
            if cut_after is None:
                stream_chunked(h.wfile, lines)
                return
            for chunk in lines:
                h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            h.wfile.flush()
            h.close_connection = True  # cut off: no terminating chunk, the connection gone
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True

    def _dispatch(self, r: Route, query: dict, raw: bytes, headers) -> tuple[int, object]:
        store, res = self.store, RESOURCES[r.plural]
        if r.sub == "log":
            return 200, serve_log(store, r.ns, r.name, query)
        if r.verb == "watch":
            return 200, {}  # streamed by _watch; reached only by a reset fault, which answers nothing
        if query.get("dryRun"):
            raise ApiError(400, "BadRequest", "dryRun is not supported by the simulated server")
        if r.verb == "list":
            return 200, self._list(r, query)
        if r.verb == "get":
            obj = store.live(r.plural, r.ns, r.name)
            if obj is None and r.plural == "namespaces":
                obj = implicit_namespace(store, r.name)
            if obj is None:
                raise not_found(r.plural, res.group, r.name)
            return 200, obj
        body = _json_body(raw) if raw else {}
        if r.verb == "create":
            return 201, store.create(r.plural, r.ns, body)
        if r.verb == "update":
            return 200, store.replace(r.plural, r.ns, r.name, body)
        if r.verb == "patch":
            current = store.get(r.plural, r.ns, r.name)
            patched = apply_patch(current, body, headers.get("Content-Type", ""))
            patched["metadata"].pop("resourceVersion", None)
            return 200, store.replace(r.plural, r.ns, r.name, patched)
        policy = query.get("propagationPolicy") or (body or {}).get("propagationPolicy")
        if r.verb == "delete":
            return 200, store.delete(r.plural, r.ns, r.name, policy)[1]
        for obj in store.select(
            r.plural, r.ns, query.get("labelSelector"), query.get("fieldSelector")
        ):  # deletecollection
            store.delete(r.plural, obj["metadata"].get("namespace"), obj["metadata"]["name"], policy)
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}

    def _list(self, r: Route, query: dict) -> dict:
        res = RESOURCES[r.plural]
        items = self.store.select(r.plural, r.ns, query.get("labelSelector"), query.get("fieldSelector"))
        start = 0
        if query.get("continue"):
            try:
                start = int(query["continue"].rsplit(":", 1)[1])
            except (IndexError, ValueError):
                raise ApiError(400, "BadRequest", "continue key is not valid") from None
        meta: dict = {"resourceVersion": self.store.resource_version}
        limit = int(query.get("limit") or 0)
        end = start + limit if limit > 0 else len(items)
        if end < len(items):
            meta["continue"] = f"{self.store.resource_version}:{end}"
            meta["remainingItemCount"] = len(items) - end
        # Items of a typed list carry no apiVersion/kind, as from the real server.
        page = [{k: v for k, v in o.items() if k not in ("apiVersion", "kind")} for o in items[start:end]]
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": meta, "items": page}


def _json_body(raw: bytes):
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ApiError(400, "BadRequest", f"error decoding request body: {exc}") from None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # benchmarks open many connections at once


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client's pool reuses sockets
    disable_nagle_algorithm = True  # headers and body go out in separate writes
    api: KubeApiServer

    def do_GET(self) -> None:
        self.api.handle(self, "GET")

    def do_POST(self) -> None:
        self.api.handle(self, "POST")

    def do_PUT(self) -> None:
        self.api.handle(self, "PUT")

    def do_PATCH(self) -> None:
        self.api.handle(self, "PATCH")

    def do_DELETE(self) -> None:
        self.api.handle(self, "DELETE")

    def log_message(self, format: str, *args) -> None:
        pass  # the request log is `KubeApiServer.requests`

    def handle(self) -> None:
        try:
            super().handle()
        except (TimeoutError, ConnectionResetError, BrokenPipeError):
            pass
