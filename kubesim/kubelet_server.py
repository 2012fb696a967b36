"""The simulated kubelets' HTTPS endpoint: `GET /stats/summary` of each node, as a kubelet serves it.

Each Node gets a listener of its own on 127.0.0.1 and says where it is as a
real Node does (Kubernetes API reference, NodeStatus): `status.addresses` (an
InternalIP, here 127.0.0.1) and `status.daemonEndpoints.kubeletEndpoint.Port`.
A client finds a kubelet as metrics-server does, from the Node object, and
speaks HTTPS to it, checking the serving certificate against the cluster CA
(kube_tls.py).

Authentication and authorization as kubelet pkg/kubelet/server/server.go
(InstallAuthFilter) does them: a bearer token nobody issued, or none, is
answered 401 "Unauthorized" (--anonymous-auth=false, as on EKS, GKE and
kubeadm nodes); an authenticated request is authorized with the attributes the
kubelet derives from its path (docs "Kubelet authentication/authorization"):
/stats/* is `nodes/stats`, an unlisted path is `nodes/proxy`, the verb is the
HTTP method's. A refusal is 403 "Forbidden (user=..., verb=..., resource=nodes,
subresource=...)". `requests` counts by those attributes, as the API server's
log counts its own, so a test can hold both against the chart's RBAC.

Tokens are issued as the kubelet projects a pod's ServiceAccount token: written
to a file the client reads (`project_token`), replaced on rotation (`rotate`).
In front of a real API server (kubelet_remote.py) `authenticate` asks it instead
(TokenReview), and a client certificate signed by `client_ca` authenticates as
its common name, as the API server does when it proxies `pods/log` here with its
`--kubelet-client-certificate`. `GET /containerLogs/{namespace}/{pod}/{container}`
answers that proxy as the kubelet's log handler does (server.go getContainerLogs),
from what the pod printed (kube_logs.py).
A Node deleted (a reclaim) closes its listener: connecting is refused.
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import ssl
import tempfile
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from kubesim import kube_tls
from kubesim.kube_faults import FaultInjector, RequestLog
from kubesim.kube_logs import serve_log
from kubesim.kube_meta import ApiError

# The kubelet's path -> subresource table (docs "Kubelet authentication/authorization").
_SUBRESOURCES = (("/stats", "stats"), ("/metrics", "metrics"), ("/logs", "log"), ("/spec", "spec"))
_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}


def request_attributes(method: str, path: str) -> tuple[str, str]:
    """(verb, subresource of `nodes`) the kubelet asks the API server to authorize."""
    sub = next((s for prefix, s in _SUBRESOURCES if path == prefix or path.startswith(prefix + "/")), "proxy")
    return _VERBS.get(method, method.lower()), sub


@dataclass(frozen=True)
class Received:
    node: str
    method: str
    path: str
    authorization: str | None  # the header as sent
    code: int | None  # the answer's status; None: the connection closed unanswered


class KubeletServer:
    def __init__(
        self,
        kubelet,
        authorize: Callable[[str, str, str, str], bool] | None = None,
        authenticate: Callable[[str], str | None] | None = None,
        client_ca: str | None = None,
    ) -> None:
        self.kubelet = kubelet
        self.authorize = authorize or (lambda user, verb, resource, subresource: True)
        self.authenticate = authenticate or self.tokens_issued
        self.tokens: dict[str, str] = {}  # token -> user (TokenReview's answer)
        self.cert_groups: dict[str, list[str]] = {}  # a client certificate's common name -> its organizations
        self.token_files: dict[str, Path] = {}  # user -> the file its token is projected to
        self.faults, self.requests = FaultInjector(), RequestLog()
        self.received: deque[Received] = deque(maxlen=10_000)
        # Requests being answered right now, and the most there ever were at once.
        self.in_flight = self.most_in_flight = 0
        self._dir = tempfile.TemporaryDirectory(prefix="sim-kubelet-")
        files = kube_tls.cluster_ca_signed(self._dir.name)
        self.ca_file = files.ca_file
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(files.cert_file, files.key_file)
        if client_ca is not None:  # the kubelet's --client-ca-file: a certificate is asked for, not required
            self.context.verify_mode = ssl.CERT_OPTIONAL
            self.context.load_verify_locations(client_ca)
        self._listeners: dict[str, _NodeListener] = {}
        self._lock = threading.Lock()
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sim-kubelets", daemon=True)
        self._thread.start()
        kubelet.endpoints = self

    # --- tokens ----------------------------------------------------------------------

    def project_token(self, user: str) -> Path:
        """A token for `user` in a file, as the kubelet projects a pod's ServiceAccount token."""
        path = Path(self._dir.name) / f"token-{len(self.token_files)}"
        self._write_token(path, user)
        self.token_files[user] = path
        return path

    def rotate(self, path: Path) -> None:
        """Replace the token in `path` with a new one for the same user; the old one is revoked."""
        old = path.read_text()
        self._write_token(path, self.tokens.pop(old))

    def tokens_issued(self, token: str) -> str | None:
        """Whom a token this server projected names."""
        return self.tokens.get(token)

    def _write_token(self, path: Path, user: str) -> None:
        token = secrets.token_urlsafe(32)
        self.tokens[token] = user
        tmp = path.with_suffix(".tmp")
        tmp.write_text(token)
        os.replace(tmp, path)  # the kubelet's atomic writer swaps the file whole

    # --- nodes -------------------------------------------------------------------------

    def open(self, node: str) -> tuple[str, int]:
        """A listener for `node`'s kubelet: the address and port its Node object reports."""
        listener = _NodeListener(self, node)
        with self._lock:
            self._listeners[node] = listener
            self._selector.register(listener.socket, selectors.EVENT_READ, listener)
        return kube_tls.LOOPBACK, listener.server_address[1]

    def close(self, node: str) -> None:
        with self._lock:
            listener = self._listeners.pop(node, None)
            if listener is not None:
                self._selector.unregister(listener.socket)
                listener.server_close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        for node in list(self._listeners):
            self.close(node)
        self._dir.cleanup()

    def _loop(self) -> None:
        while not self._stop.is_set():
            for key, _ in self._selector.select(timeout=0.05):
                with self._lock:
                    if self._listeners.get(key.data.node) is key.data:
                        key.data.handle_request()  # accepts; the connection gets a thread of its own

    # --- requests --------------------------------------------------------------------------

    def serve(self, h: _Handler) -> None:
        method, node = h.command, h.server.node
        url = urlsplit(h.path)
        path, query = url.path, dict(parse_qsl(url.query))
        auth = h.headers.get("Authorization")
        cert = h.connection.getpeercert() if isinstance(h.connection, ssl.SSLSocket) else None
        subject = dict(pair for rdn in (cert or {}).get("subject", ()) for pair in rdn)
        if "commonName" in subject:  # an x509 user's groups are its certificate's organizations
            orgs = [subject["organizationName"]] if "organizationName" in subject else []
            self.cert_groups[subject["commonName"]] = orgs
        verb, sub = request_attributes(method, path)
        self.requests.record(verb, f"nodes/{sub}")
        with self._lock:
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            answer = self._answer(node, method, path, auth, verb, sub, subject.get("commonName"), query)
        finally:
            with self._lock:
                self.in_flight -= 1
        self.received.append(Received(node, method, path, auth, answer[0] if answer else None))
        if answer is None:
            h.close_connection = True  # no answer: the connection just closes
            return
        code, body, truncate = answer
        h.send_response(code)
        json_body = code == 200 and path == "/stats/summary"
        h.send_header("Content-Type", "application/json" if json_body else "text/plain; charset=utf-8")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if truncate:  # the whole body promised, half of it sent, the connection gone
            h.wfile.write(body[: len(body) // 2])
            h.close_connection = True
            return
        h.wfile.write(body)

    def _answer(
        self, node: str, method: str, path: str, auth: str | None, verb: str, sub: str, cn: str | None, query: dict
    ):
        """(code, body, cut the body off) or None for no answer at all."""
        if self.kubelet.store.live("nodes", None, node) is None:
            return None  # gone with its node
        fault = self.faults.take(method, path, verb, f"nodes/{sub}")
        if fault is not None:
            if fault.hang and self._stop.wait(fault.hang):
                return None
            if fault.status is not None:
                return fault.status, fault.error().message.encode(), False
            if not fault.apply or fault.reset:
                return None  # a GET: reset before or after reading, the client sees the same
        token = auth[len("Bearer ") :].strip() if auth and auth.lower().startswith("bearer ") else None
        # The kubelet's authenticator union: a verified client certificate first, then the token.
        user = cn or (self.authenticate(token) if token else None)
        if user is None:
            return 401, b"Unauthorized", False
        if not self.authorize(user, verb, "nodes", sub):
            return 403, f"Forbidden (user={user}, verb={verb}, resource=nodes, subresource={sub})".encode(), False
        parts = path.split("/")
        if path != "/stats/summary" and not (len(parts) == 5 and parts[1] == "containerLogs"):
            return 404, b"404 page not found", False
        if method != "GET":
            return 405, b"405: Method Not Allowed", False
        if parts[1] == "containerLogs":
            _, _, ns, pod, container = parts
            try:
                with self.kubelet.store.lock:
                    body = serve_log(self.kubelet.store, ns, pod, {**query, "container": container, "follow": ""})
            except ApiError as exc:
                return exc.code, exc.message.encode(), False
            return 200, body, False
        body = json.dumps(self.kubelet.stats_summary(node), separators=(",", ":")).encode()
        return 200, body, fault is not None and fault.truncate


class _NodeListener(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    timeout = 0.5  # handle_request's own wait, should the ready connection have gone

    def __init__(self, owner: KubeletServer, node: str) -> None:
        self.owner, self.node = owner, node
        super().__init__((kube_tls.LOOPBACK, 0), _Handler)

    def get_request(self):
        sock, addr = self.socket.accept()
        # The handshake happens in the connection's thread (finish_request), never in the accept loop.
        return self.owner.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request, client_address) -> None:
        try:
            request.settimeout(30)
            request.do_handshake()
            super().finish_request(request, client_address)
        except (OSError, ssl.SSLError):
            pass  # a client that gave up, or refused our certificate


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a client pools kubelet connections
    disable_nagle_algorithm = True
    server: _NodeListener

    def do_GET(self) -> None:
        self.server.owner.serve(self)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def log_message(self, format: str, *args) -> None:
        pass  # the request log is `KubeletServer.requests` and `.received`
