"""A real Kubernetes control plane on loopback (etcd, kube-apiserver, controller-manager, scheduler, kwok)."""

from __future__ import annotations

import base64
import ctypes
import functools
import ipaddress
import json
import os
import random
import re
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import kubernetes
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

# The simulated cluster's certificate helpers serve the real one's as well.
from catchup_assets.backends.kubernetes.connect import backend_client, kube_configuration
from kubesim.kube_tls import _builder, _key_pem, _name

ROOT = Path(__file__).resolve().parents[2]
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
# The ones the project's Jobs meet, by their v1.37 names (`kube-controller-manager --help`); serviceaccount
# makes each namespace's `default` account, without which no pod is admitted.
CONTROLLERS = (
    "job-controller,garbage-collector-controller,ttl-after-finished-controller,persistentvolume-binder-controller,"
    "persistentvolumeclaim-protection-controller,node-lifecycle-controller,taint-eviction-controller,"
    "serviceaccount-controller,serviceaccount-token-controller,root-ca-certificate-publisher-controller,"
    "namespace-controller,pod-garbage-collector-controller"
)
KUBELET_CLIENT = "kube-apiserver-kubelet-client"
KWOK_NODE = "kwok.x-k8s.io/node"  # the annotation of a node kwok runs
DEADLINE = 60.0  # per component; kube-apiserver is ready in 2-4 s on an idle 2-core machine, the rest in < 1 s
GRACE = 10.0
PEM = serialization.Encoding.PEM


class ControlPlaneError(RuntimeError):
    """A component did not start or did not stop."""


def k8s_version() -> str:
    """The Kubernetes release tools/k8s/go.mod pins, the one build.sh keys its bin dir on."""
    text = (ROOT / "tools/k8s/go.mod").read_text()
    return re.search(r"^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)", text, re.M).group(1)


@functools.cache
def bin_dir() -> Path:
    """$CATCHUP_K8S_BIN when it holds the binaries, else build.sh's dir; skips the test without them (fails in CI)."""
    env = os.environ.get("CATCHUP_K8S_BIN")
    if env and all((Path(env) / name).is_file() for name in BINARIES):
        return Path(env)
    # build.sh reads CATCHUP_K8S_BIN as its cache root and builds only what is missing: a cold build takes
    # minutes, past pytest's 300 s timeout, so run it before the tier; warm, it only checks each --version.
    done = subprocess.run(["bash", str(ROOT / "tools/k8s/build.sh")], capture_output=True, text=True)
    if done.returncode == 0 and done.stdout.strip():
        return Path(done.stdout.split()[-1])
    reason = f"no Kubernetes binaries: tools/k8s/build.sh exited {done.returncode}: {done.stderr.strip()[-800:]}"
    (pytest.fail if os.environ.get("CI") else pytest.skip)(reason)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


PORT_SLICE = 1500  # listen ports per xdist worker, below the kernel's ephemeral range


def ephemeral_floor() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def listen_ports(names) -> dict[str, int]:
    """A free port for each of `names`, distinct, below the kernel's ephemeral range, in a slice of its own per
    xdist worker.

    A port bound to 0 and released comes from the ephemeral range, where every client connection takes its
    local port: the planes' own (kube-apiserver to etcd, the controllers to kube-apiserver) took
    kube-controller-manager's before it bound, on a run with two planes up at once. Below the range, only a
    listener can take a port, and the other worker's planes pick from another slice."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]
    floor = ephemeral_floor()
    low = floor - PORT_SLICE * (1 + (int(worker) % 8 if worker.isdigit() else 0))
    if low < 1024:
        return {name: free_port() for name in names}
    ports: dict[str, int] = {}
    candidates = iter(random.sample(range(low, low + PORT_SLICE), PORT_SLICE))
    for name in names:
        for port in candidates:
            with socket.socket() as sock:
                try:
                    sock.bind(("127.0.0.1", port))
                except OSError:
                    continue
            ports[name] = port
            break
        else:
            raise ControlPlaneError(f"no free port in {low}-{low + PORT_SLICE - 1} for {name}")
    return ports


def listens(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def write_pki(d: Path) -> None:
    """A CA, the apiserver's serving certificate, an admin client certificate, the service-account key pair."""
    d.mkdir(parents=True)
    ca_key, ca = ec.generate_private_key(ec.SECP256R1()), _name("catchup-test-ca")
    ca_cert = _builder(ca, ca, ca_key).add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
    files = {"ca.key": _key_pem(ca_key), "ca.crt": ca_cert.sign(ca_key, hashes.SHA256()).public_bytes(PEM)}
    sans = [x509.DNSName(n) for n in ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ("127.0.0.1", "10.0.0.1")]
    for name, subject, usage, alt in (
        ("apiserver", _name("kube-apiserver"), ExtendedKeyUsageOID.SERVER_AUTH, sans),
        ("admin", _name("admin", "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH, []),
        # What the API server presents to a kubelet it proxies to (pods/log): kubeadm's name for it.
        ("kubelet-client", _name(KUBELET_CLIENT, "system:masters"), ExtendedKeyUsageOID.CLIENT_AUTH, []),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _builder(subject, ca, key).add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        cert = cert.add_extension(x509.SubjectAlternativeName(alt), critical=False) if alt else cert
        files[f"{name}.key"], files[f"{name}.crt"] = _key_pem(key), cert.sign(ca_key, hashes.SHA256()).public_bytes(PEM)
    sa_key = ec.generate_private_key(ec.SECP256R1())  # kube-apiserver signs ServiceAccount tokens ES256 with it
    files["sa.key"] = _key_pem(sa_key)
    files["sa.pub"] = sa_key.public_key().public_bytes(PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    for name, data in files.items():
        (d / name).write_bytes(data)
        (d / name).chmod(0o600)


def _die_with_parent() -> None:
    # PR_SET_PDEATHSIG: a killed pytest takes its components with it instead of leaving them listening.
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)


class ControlPlane:
    """etcd, kube-apiserver, kube-controller-manager, kube-scheduler and (kwok=True) kwok, as a context manager."""

    def __init__(self, bin_dir: Path, *, kwok: bool = True, extra_args: dict[str, list[str]] | None = None):
        self.bin_dir, self.kwok, self.extra_args = Path(bin_dir), kwok, extra_args or {}
        self.dir = Path(tempfile.mkdtemp(prefix="catchup-k8s-"))
        self.pki = self.dir / "pki"
        self.ca_file, self.kubeconfig = self.pki / "ca.crt", self.dir / "kubeconfig"
        self.client_cert, self.client_key = self.pki / "admin.crt", self.pki / "admin.key"
        self.admin_token = secrets.token_hex(16)
        names = ("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
        self.ports = listen_ports([name for name in names if kwok or name != "kwok"])
        self.server = f"https://127.0.0.1:{self.ports['kube-apiserver']}"
        self.etcd_url = f"http://127.0.0.1:{self.ports['etcd']}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        self.startup_seconds: dict[str, float] = {}
        self._started: dict[str, float] = {}
        self.exit_codes: dict[str, int] = {}

    @property
    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.procs.items()}

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop(keep_dir=True)
            raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop(keep_dir=exc_type is not None)

    def start(self) -> None:
        write_pki(self.pki)
        (self.pki / "tokens.csv").write_text(f'{self.admin_token},admin,admin-uid,"system:masters"\n')
        self._write_kubeconfig()
        self._spawn("etcd", self._etcd_args())
        self._wait("etcd", lambda: '"health":"true"' in self._get(f"{self.etcd_url}/health"))
        self._spawn("kube-apiserver", self._apiserver_args())
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        self._wait("kube-apiserver", lambda: self._get(f"{self.server}/readyz", ctx, self.admin_token) == "ok")
        common = ["--kubeconfig", str(self.kubeconfig), "--bind-address=127.0.0.1", "--leader-elect=false"]
        self._spawn("kube-controller-manager", [*common, *self._kcm_args()])
        self._spawn("kube-scheduler", [*common, f"--secure-port={self.ports['kube-scheduler']}"])
        if self.kwok:
            self._spawn("kwok", self._kwok_args())
        # They serve /healthz with a certificate they sign themselves at start: nothing to verify it with.
        insecure = ssl._create_unverified_context()
        for name in ("kube-controller-manager", "kube-scheduler"):
            self._wait(name, lambda n=name: self._get(f"https://127.0.0.1:{self.ports[n]}/healthz", insecure) == "ok")
        if self.kwok:
            self._wait("kwok", lambda: self._get(f"http://127.0.0.1:{self.ports['kwok']}/healthz") == "ok")

    def _etcd_args(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        return [
            "--name=test", f"--data-dir={self.dir / 'etcd'}", "--log-level=warn",
            f"--listen-client-urls={self.etcd_url}", f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}", f"--initial-cluster=test={peer}",
            # A test that compacts etcd itself needs revisions nobody else removes.
            "--auto-compaction-retention=0",
            # Throwaway data: fsync on a loaded disk only slows every write the tests wait on.
            "--unsafe-no-fsync",
        ]  # fmt: skip

    def _apiserver_args(self) -> list[str]:
        p = self.pki
        return [
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.ports['kube-apiserver']}", f"--etcd-servers={self.etcd_url}",
            f"--tls-cert-file={p / 'apiserver.crt'}", f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={self.ca_file}", f"--token-auth-file={p / 'tokens.csv'}",
            f"--service-account-key-file={p / 'sa.pub'}", f"--service-account-signing-key-file={p / 'sa.key'}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--service-cluster-ip-range=10.0.0.0/24", "--authorization-mode=Node,RBAC",
            "--enable-admission-plugins=NodeRestriction,PodSecurity",
            # pods/log and nodes/proxy reach a node's kubelet at its InternalIP (virtual nodes have no DNS name).
            f"--kubelet-client-certificate={p / 'kubelet-client.crt'}",
            f"--kubelet-client-key={p / 'kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP",
            # Lets a privileged pod reach admission, where PodSecurity refuses it, instead of validation's 422.
            "--allow-privileged=true",
            # The default reconciler writes the `kubernetes` Endpoints for the advertise address, and refuses loopback.
            "--endpoint-reconciler-type=none",
            f"--cert-dir={self.dir / 'apiserver-certs'}",
        ]  # fmt: skip

    def _kcm_args(self) -> list[str]:
        return [
            f"--secure-port={self.ports['kube-controller-manager']}", f"--controllers={CONTROLLERS}",
            f"--service-account-private-key-file={self.pki / 'sa.key'}", f"--root-ca-file={self.ca_file}",
            "--use-service-account-credentials=false",
        ]  # fmt: skip

    def _kwok_args(self) -> list[str]:
        return [
            # Only the nodes made for it: the virtual kubelet (kubesim/kubelet_remote.py) runs the others.
            f"--kubeconfig={self.kubeconfig}", f"--manage-nodes-with-annotation-selector={KWOK_NODE}=fake",
            f"--config={self.bin_dir / 'kwok-stages.yaml'}", "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{self.ports['kwok']}", "--cidr=10.244.0.0/16",
        ]  # fmt: skip

    def _write_kubeconfig(self) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": "test", "cluster": {"server": self.server, "certificate-authority": str(self.ca_file)}}
            ],
            "users": [{"name": "admin", "user": {"token": self.admin_token}}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": "admin"}}],
            "current-context": "test",
        }
        self.kubeconfig.write_text(json.dumps(config, indent=1))  # JSON is YAML
        self.kubeconfig.chmod(0o600)

    def _spawn(self, name: str, args: list[str]) -> None:
        self.logs[name] = self.dir / f"{name}.log"
        args = [str(self.bin_dir / name), *args, *self.extra_args.get(name, [])]
        with self.logs[name].open("wb") as log:
            self.procs[name] = subprocess.Popen(
                args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
            )
        self._started[name] = time.monotonic()

    @staticmethod
    def _get(url: str, context: ssl.SSLContext | None = None, token: str | None = None) -> str:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=context, timeout=2) as r:
                return r.read().decode()
        except OSError:
            return ""

    def _wait(self, name: str, healthy) -> None:
        proc, started = self.procs[name], self._started[name]
        while time.monotonic() - started < DEADLINE:
            if proc.poll() is not None:
                raise self._error(name, f"exited {proc.returncode} while starting")
            if healthy():
                self.startup_seconds[name] = round(time.monotonic() - started, 2)
                return
            time.sleep(0.1)
        raise self._error(name, f"not healthy within {DEADLINE:.0f} s")

    def _error(self, name: str, what: str) -> ControlPlaneError:
        tail = "\n".join(self.logs[name].read_text(errors="replace").splitlines()[-30:])
        paths = "\n".join(f"  {n}: {p}" for n, p in self.logs.items())
        return ControlPlaneError(f"{name} {what}; the last lines of {self.logs[name]}:\n{tail}\nlogs:\n{paths}")

    def stop(self, keep_dir: bool = False) -> None:
        """SIGTERM each process by PID in reverse start order (SIGKILL after 10 s), then check no port listens."""
        for name, proc in reversed(self.procs.items()):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(GRACE)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            self.exit_codes[name] = proc.returncode
        still = {name: port for name, port in self.ports.items() if listens(port)}
        if still:
            raise ControlPlaneError(f"ports still listening after stop: {still}; logs in {self.dir}")
        if keep_dir:
            print(f"control plane logs kept in {self.dir}: " + ", ".join(str(p) for p in self.logs.values()))
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def etcd(self, path: str, body: dict) -> dict:
        """etcd's v3 JSON gateway (the API etcdctl speaks over gRPC): e.g. `kv/range`, `kv/compaction`."""
        req = urllib.request.Request(f"{self.etcd_url}/v3/{path}", data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=10) as resp:
            return json.loads(resp.read())

    def etcd_revision(self) -> int:
        """etcd's head revision: every write of the cluster's raises it."""
        return int(self.etcd("kv/range", {"key": base64.b64encode(b"/").decode()})["header"]["revision"])

    def compact_etcd(self) -> int:
        """Compact etcd to its head revision, as kube-apiserver's compactor does every --etcd-compaction-interval
        (behind the watch cache, only a client watching from before it sees a 410); returns that revision."""
        head = self.etcd_revision()
        self.etcd("kv/compaction", {"revision": str(head), "physical": True})
        return head

    def harness_client(self):
        """The admin kubeconfig's ApiClient as the kubernetes package makes it (urllib3's retries on): for the
        stand-ins around the plane (the virtual kubelet, the volume provisioner), which are not the backend and
        whose real counterparts (client-go) retry on their own."""
        return kubernetes.config.new_client_from_config(config_file=str(self.kubeconfig))

    def api_client(self, token: str | None = None):
        """An official kubernetes ApiClient: the admin kubeconfig's, or one presenting `token`; configured as
        a run's is (connect.py), as the backends the real-plane suites build on it must be (issue 45 item 8)."""
        if token is None:
            return backend_client(kube_configuration(str(self.kubeconfig), ""))
        config = kubernetes.client.Configuration(host=self.server, ssl_ca_cert=str(self.ca_file))
        # The prefix inside the value: kubernetes 36 looks the prefix up under another key than this one.
        config.api_key = {"authorization": f"Bearer {token}"}
        return backend_client(config)

    def create_namespace(self, name: str, labels: dict[str, str] | None = None, exist_ok: bool = False) -> None:
        """A namespace, returned once its `default` ServiceAccount exists (no pod is admitted before)."""
        with self.api_client() as api:
            core = kubernetes.client.CoreV1Api(api)
            try:
                core.create_namespace({"metadata": {"name": name, "labels": labels or {}}})
            except kubernetes.client.ApiException as exc:
                if not (exist_ok and exc.status == 409):  # another test of the session's plane made it
                    raise
            deadline = time.monotonic() + DEADLINE
            while not core.list_namespaced_service_account(name, field_selector="metadata.name=default").items:
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"no default ServiceAccount in {name} after {DEADLINE:.0f} s")
                time.sleep(0.1)
