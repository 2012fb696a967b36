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
Watches are served as the API reference describes them (kube_watch.py); a request's
route and media type are read in kube_route.py, its verb applied to the store in kube_verbs.py.
Not modeled: dry runs, namespace lifecycle (every namespace exists:
a GET of one never created answers it bare, kube_resources.implicit_namespace),
authn/authz, server-side apply, graceful pod deletion (a DELETE
removes a pod at once; Jobs keep batch/v1's orphaning default).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from kubesim.kube_faults import FaultInjector, RequestLog
from kubesim.kube_logs import FollowedLog, stream_chunked
from kubesim.kube_meta import ApiError, ManualClock
from kubesim.kube_resources import RESOURCES
from kubesim.kube_route import Route, negotiate
from kubesim.kube_store import Store
from kubesim.kube_verbs import dispatch
from kubesim.kube_watch import watch_lines

VERSION = {"major": "1", "minor": "31", "gitVersion": "v1.31.0-catchup-sim", "platform": "linux/amd64"}


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
                            dispatch(self.store, route, query, raw, h.headers)
                        h.close_connection = True  # committed; the answer never leaves
                        return
                negotiate(h.headers.get("Accept"), resource)
                if self.latency:
                    time.sleep(self.latency)
                if verb == "watch":
                    self._watch(h, route, query, cut_after=1 if truncate else None, slow_body=slow_body)
                    return
                with self.store.lock:
                    code, body = dispatch(self.store, route, query, raw, h.headers)
        except ApiError as exc:
            code, body, headers = exc.code, exc.text.encode() if exc.text is not None else exc.status(), exc.headers
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
