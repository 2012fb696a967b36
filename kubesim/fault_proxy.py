"""A bad network in front of a real kube-apiserver: R2's faults (kube_faults.FaultInjector) on real traffic.

The client speaks plain HTTP to the proxy on loopback; the proxy speaks TLS to the API server and passes
the client's `Authorization` through, so the server authenticates and authorizes the client, not the
proxy. What goes wrong is drawn as on kubesim, by the same injector and seed: a 429/500/503/504 with the
API server's `Status` body, a reset before the request reached the server or after it committed, a stall
past the client's timeout after which the request still lands, a body cut off mid-read, and a watch
stream cut after its first event with no terminating chunk, the connection gone. Everything else is the
real server's answer, byte for byte: its 409s, 410s (etcd compacted), 403s and watch events.

Formats, from the Kubernetes API reference: an injected error is a `meta/v1 Status` (kube_faults.py, the
reasons and messages apiserver's `staging/src/k8s.io/apimachinery/pkg/api/errors` writes, with
`Retry-After` on a 429); a watch is relayed as apiserver streams it, one JSON `WatchEvent` a line in its
own chunk of `Transfer-Encoding: chunked` (API concepts, "Efficient detection of changes").
"""

from __future__ import annotations

import http.client
import json
import ssl
import sys
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from kubesim.kube_faults import FaultInjector, RequestLog
from kubesim.kube_meta import ApiError
from kubesim.kube_route import Route

# Per connection (RFC 9110 section 7.6.1): never passed on by a proxy.
_HOP = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length", "host", "te", "upgrade"})


class FaultProxy:
    def __init__(self, upstream: str, context: ssl.SSLContext, timeout: float = 60.0) -> None:
        split = urlsplit(upstream)
        self.upstream_host, self.upstream_port = split.hostname, split.port or 443
        self.context, self.timeout = context, timeout
        self.faults = FaultInjector()
        self.requests = RequestLog()
        self.answered: Counter[int] = Counter()  # what the real server answered, by status
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def host(self) -> str:
        assert self._httpd is not None, "proxy not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> FaultProxy:
        handler = type("Handler", (_Handler,), {"proxy": self})
        self._httpd = _Server(("127.0.0.1", 0), handler)
        threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases stalled requests
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _connect(self) -> http.client.HTTPSConnection:
        return http.client.HTTPSConnection(
            self.upstream_host, self.upstream_port, context=self.context, timeout=self.timeout
        )

    def handle(self, h: _Handler, method: str) -> None:
        url = urlsplit(h.path)
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else None
        try:
            route = Route(method, url.path, dict(parse_qsl(url.query, keep_blank_values=True)))
            verb, resource = route.verb, route.resource
        except ApiError:
            verb, resource = "?", url.path  # not one of the simulated resources: passed on untouched
        self.requests.record(verb, resource)
        fault = self.faults.take(method, url.path, verb, resource)
        truncate = False
        if fault is not None:
            if fault.hang and self._stopping.wait(fault.hang):
                return
            if fault.status is not None:
                err = fault.error()
                payload = err.text.encode() if err.text is not None else json.dumps(err.status()).encode()
                return _send(h, err.code, payload, err.headers)
            if not fault.apply:  # reset before the request left
                h.close_connection = True
                return
            truncate = fault.truncate
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP}
        conn = self._connect()
        try:
            conn.request(method, h.path, body=body, headers=headers)
            resp = conn.getresponse()
            self.answered[resp.status] += 1
            passed = [(k, v) for k, v in resp.getheaders() if k.lower() not in _HOP]
            if fault is not None and fault.reset:  # committed; the answer never leaves
                resp.read()
                h.close_connection = True
            elif verb == "watch" and resp.status == 200:
                _stream(h, resp, passed, cut_after=1 if truncate else None)
            else:
                _send(h, resp.status, resp.read(), dict(passed), truncate=truncate)
        except (OSError, http.client.HTTPException):
            h.close_connection = True  # the server or the client went away: so does this connection
        finally:
            conn.close()


def _send(h: _Handler, code: int, payload: bytes, headers: dict, truncate: bool = False) -> None:
    try:
        h.send_response(code)
        for key, value in headers.items():
            h.send_header(key, value)
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        # A truncated body promises its whole length and sends half: urllib3 raises IncompleteRead.
        h.wfile.write(payload[: len(payload) // 2] if truncate else payload)
        h.wfile.flush()
        h.close_connection = h.close_connection or truncate
    except OSError:
        h.close_connection = True


def _stream(h: _Handler, resp: http.client.HTTPResponse, headers: list, cut_after: int | None) -> None:
    """The watch's events as they come, one chunk each (the API server writes one JSON line per event)."""
    h.send_response(resp.status)
    for key, value in headers:
        h.send_header(key, value)
    h.send_header("Transfer-Encoding", "chunked")
    h.end_headers()
    h.wfile.flush()
    sent = 0
    for line in iter(resp.readline, b""):
        h.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
        h.wfile.flush()
        sent += 1
        if cut_after is not None and sent >= cut_after:
            h.close_connection = True  # no terminating chunk: the client's read fails mid-stream
            return
    h.wfile.write(b"0\r\n\r\n")
    h.wfile.flush()


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # A client that closed its keep-alive connection (the informer's idle watch) is no error.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the client's pool expects
    disable_nagle_algorithm = True
    proxy: FaultProxy

    def do_GET(self) -> None:
        self.proxy.handle(self, "GET")

    def do_POST(self) -> None:
        self.proxy.handle(self, "POST")

    def do_PUT(self) -> None:
        self.proxy.handle(self, "PUT")

    def do_PATCH(self) -> None:
        self.proxy.handle(self, "PATCH")

    def do_DELETE(self) -> None:
        self.proxy.handle(self, "DELETE")

    def log_message(self, *args) -> None:  # quiet: the RequestLog counts
        pass
