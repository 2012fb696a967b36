"""Each kubelet's `/stats/summary`, read directly as metrics-server reads it (L19).

Why not through the API server (`/api/v1/nodes/{node}/proxy/stats/summary`):
that takes `get` on `nodes/proxy`, which reaches every kubelet path on every
node: /pods with every pod's environment, /containerLogs, /exec where enabled.
The kubelet authorizes /stats/* as the `nodes/stats` subresource (docs "Kubelet
authentication/authorization"; pkg/kubelet/server/auth.go), so a direct read
needs `get` on `nodes/stats`, and `get` on `nodes` to find the kubelet: the
Node's `status.addresses` taken in a preference order (metrics-server's
--kubelet-preferred-address-types; its release manifests say
InternalIP,ExternalIP,Hostname) and `status.daemonEndpoints.kubeletEndpoint.Port`
(10250 when absent). A Node is read once and its address kept until its kubelet
stops answering there (a node gone, or moved).

HTTPS through urllib3 (the kubernetes client's own HTTP library), the serving
certificate verified against a CA bundle (by default the cluster CA the pod
mounts, which signs kubelet certificates only where serverTLSBootstrap is on),
with the pod's ServiceAccount token, read again whenever its file changes
(projected tokens rotate). The kubelet must accept such tokens
(--authentication-token-webhook, as EKS, GKE and kubeadm nodes do).

Errors come in the backend's two kinds: `TransientBackendError` (a node that
does not answer now, 429, 5xx, a body cut off) and `KubeletRefused` (401, 403,
a certificate that does not verify, a Node without a usable address: the same
answer next time until someone fixes the config). Neither is retried within a
pass: a sample missed is taken again at the next interval, and a node that
stopped answering must not hold up the pass. A kubelet that does not answer has
its Node read again at once: a Node gone (404) is `NodeGone`, the reclaim the
backend must know of, since the pods on it stay Running in the API until PodGC.
"""

from __future__ import annotations

import json
import os
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass

import urllib3

from catchup_assets.core.dispatch.ports import BackendError, TransientBackendError

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"  # where a pod's ServiceAccount volume is mounted
ADDRESS_TYPES = frozenset({"Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS"})  # NodeAddress.type
DEFAULT_PORT = 10250  # the kubelet's --port
TRANSIENT = frozenset({429, 500, 502, 503, 504})
# One pool per kubelet, one idle connection in each: a kubelet is read every stats_interval,
# and a kept connection saves a TLS handshake per read. Past this many nodes the least
# recently read lose theirs.
POOLS = 1024


@dataclass(frozen=True)
class KubeletAccess:
    """How kubelets are reached and trusted; every field is a `kubelet_*` field of KubernetesConfig."""

    preferred_address_types: tuple[str, ...] = ("InternalIP", "ExternalIP", "Hostname")
    ca_file: str | None = None  # None: the cluster CA the pod mounts (SA_DIR/ca.crt)
    # Off by default: without verification anyone on the path between this pod and a node
    # sees the token and can answer for the kubelet (metrics-server's --kubelet-insecure-tls).
    insecure_skip_tls_verify: bool = False
    token_file: str = f"{SA_DIR}/token"
    connect_timeout: float = 5.0
    read_timeout: float = 10.0  # metrics-server's --kubelet-request-timeout
    # Summaries read at once: at 1000 nodes and ~20 ms a read, one after another a round
    # would take 20 s, longer than stats_interval, and hold the dispatcher's pass that long.
    concurrency: int = 32

    def __post_init__(self) -> None:
        def bad(field: str, why: str) -> ValueError:
            return ValueError(f"kubelet setting {field!r}: {getattr(self, field)!r} {why}")

        types = self.preferred_address_types
        if not isinstance(types, tuple) or not types or len(set(types)) != len(types):
            raise bad("preferred_address_types", "must be a non-empty tuple without repeats")
        if not set(types) <= ADDRESS_TYPES:
            raise bad("preferred_address_types", f"names a type other than {sorted(ADDRESS_TYPES)}")
        if not isinstance(self.insecure_skip_tls_verify, bool):
            raise bad("insecure_skip_tls_verify", "must be a bool")
        if self.ca_file is not None and (not isinstance(self.ca_file, str) or not self.ca_file):
            raise bad("ca_file", "must be a path or None")
        if self.ca_file is not None and self.insecure_skip_tls_verify:
            raise bad("ca_file", "is set while insecure_skip_tls_verify is: choose one")
        if not isinstance(self.token_file, str) or not self.token_file:
            raise bad("token_file", "must be a path")
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or not 1 <= self.concurrency:
            raise bad("concurrency", "must be an integer >= 1")
        for field in ("connect_timeout", "read_timeout"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise bad(field, "must be a number > 0")

    @property
    def ca(self) -> str | None:
        """The CA bundle serving certificates are checked against; None when not checked."""
        return None if self.insecure_skip_tls_verify else self.ca_file or f"{SA_DIR}/ca.crt"


class NodeGone(TransientBackendError):
    """The Node object is gone: its kubelet with it, and the pods bound to it are lost."""


class KubeletRefused(BackendError):
    """The kubelet or this side's config says no, and will again until someone fixes it.

    `cause` groups repeats, so the backend reports each cause once, not once per node and pass."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(message)
        self.cause = cause


class TokenFile:
    """The ServiceAccount token, read again whenever its file changes (a new inode, size or mtime)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._token: str | None = None

    def read(self) -> str | None:
        try:
            st = os.stat(self.path)  # follows the projected volume's ..data symlink to the current file
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
            if stamp != self._stamp:
                with open(self.path) as f:
                    self._token = f.read().strip() or None
                self._stamp = stamp
        except OSError:
            self._stamp = self._token = None
        return self._token


class KubeletReader:
    """`summary(node)`: one node's /stats/summary, the Node read once while it runs our pods."""

    def __init__(self, access: KubeletAccess, read_node: Callable[[str], object]) -> None:
        self.access = access
        self._read_node = read_node  # the Node object through the API client (get nodes)
        self._token = TokenFile(access.token_file)
        self._endpoints: dict[str, tuple[str, int]] = {}
        self._lock = threading.Lock()  # summaries of several nodes are read at once
        trust = (
            {"cert_reqs": "CERT_NONE", "assert_hostname": False}
            if access.insecure_skip_tls_verify
            else {"cert_reqs": "CERT_REQUIRED", "ca_certs": access.ca}
        )
        timeout = urllib3.Timeout(connect=access.connect_timeout, read=access.read_timeout)
        self._http = urllib3.PoolManager(num_pools=POOLS, maxsize=1, timeout=timeout, retries=False, **trust)

    def summary(self, node: str) -> dict:
        host, port = self._endpoint(node)
        where = f"kubelet of node {node} ({host}:{port})"
        ca = self.access.ca
        if ca is not None and not os.path.isfile(ca):
            raise KubeletRefused("ca", f"{where}: CA bundle {ca} not found; set the kubelet CA file")
        token = self._token.read()
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        try:
            pool = self._http.connection_from_host(host, port, scheme="https")
            resp = pool.urlopen("GET", "/stats/summary", headers=headers)
        except urllib3.exceptions.SSLError as exc:
            self._forget(node)
            if any(isinstance(a, ssl.SSLCertVerificationError) for a in exc.args):
                raise KubeletRefused(
                    "tls",
                    f"{where}: its serving certificate does not verify against {ca} ({exc}). A kubelet "
                    "signs its own unless serverTLSBootstrap is on: give the CA that signs them, or "
                    "(insecure) skip verification",
                ) from exc
            raise TransientBackendError(f"{where}: {exc}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            self._forget(node)
            self._endpoint(node)  # read the Node again now: gone (NodeGone) or moved, the next read goes there
            raise TransientBackendError(f"{where}: {type(exc).__name__}: {exc}") from exc
        if resp.status == 200:
            try:
                return json.loads(resp.data)
            except ValueError as exc:
                raise TransientBackendError(f"{where}: unreadable summary: {exc}") from exc
        text = resp.data[:300].decode(errors="replace").strip()
        if resp.status in TRANSIENT:
            raise TransientBackendError(f"{where}: HTTP {resp.status} {text}")
        if resp.status == 401:
            missing = f"no token was sent: {self.access.token_file} is missing or empty"
            sent = "its token was refused" if token else missing
            raise KubeletRefused(
                "401",
                f"{where} answered 401 {text}: {sent}; the kubelet must accept ServiceAccount "
                "tokens (--authentication-token-webhook)",
            )
        if resp.status == 403:
            raise KubeletRefused("403", f"{where} answered 403 {text}: grant get on nodes/stats")
        raise KubeletRefused(str(resp.status), f"{where} answered HTTP {resp.status} {text}")

    def _endpoint(self, node: str) -> tuple[str, int]:
        found = self._endpoints.get(node)
        if found is not None:
            return found
        from kubernetes.client import ApiException  # loaded with the backend; KubeletAccess stays light

        try:
            obj = self._read_node(node)
        except ApiException as exc:
            if exc.status == 404:
                raise NodeGone(f"node {node} is gone") from exc
            raise KubeletRefused(
                f"node {exc.status}", f"cannot read Node {node}: HTTP {exc.status} {exc.reason}; grant get on nodes"
            ) from exc
        status = obj.status
        addresses: dict[str, str] = {}
        for a in (status.addresses if status else None) or ():
            addresses.setdefault(a.type, a.address)  # the first of each type, as metrics-server takes it
        prefs = self.access.preferred_address_types
        host = next((addresses[t] for t in prefs if t in addresses), None)
        if host is None:
            raise KubeletRefused("address", f"node {node} has no address of types {list(prefs)} ({addresses})")
        ep = status.daemon_endpoints.kubelet_endpoint if status.daemon_endpoints else None
        found = (host, ep.port if ep is not None and ep.port else DEFAULT_PORT)
        with self._lock:
            if len(self._endpoints) >= POOLS:
                del self._endpoints[next(iter(self._endpoints))]  # the longest known: bounded, like the pools
            self._endpoints[node] = found
        return found

    def _forget(self, node: str) -> None:
        with self._lock:
            self._endpoints.pop(node, None)

    def summaries(self, nodes: list[str]) -> list[tuple[str, dict | BackendError]]:
        """Each node's summary, or the error reading it, `concurrency` reads at a time, in `nodes`' order."""

        def one(node: str) -> tuple[str, dict | BackendError]:
            try:
                return node, self.summary(node)
            except BackendError as exc:  # KubeletRefused, TransientBackendError: the caller judges
                return node, exc

        if len(nodes) <= 1 or self.access.concurrency == 1:
            return [one(n) for n in nodes]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(self.access.concurrency, len(nodes))) as pool:
            return list(pool.map(one, nodes))
