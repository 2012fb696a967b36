"""R2 on the real control plane (issue 34): one request in ten goes wrong between the backend and a real
kube-apiserver, etcd is compacted under its watches, and the twin mission ends as a clean run does (L5, T1).

The faults are kubesim's R2 faults (tests/reliability/test_api_faults.py), drawn by the same injector and
seeds, put on real traffic by kubesim/fault_proxy.py: 429/500/503/504 with their Status bodies, resets
before and after the request landed, stalls past the client's timeout, bodies and watch streams cut off.
The 410s are the real server's own: etcd compacted every half second behind an API server without its
watch cache, so a watch from an older resourceVersion is answered Expired by etcd itself. The kubelet's
endpoints (virtual) fail at the same rate, as on kubesim.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections import Counter
from dataclasses import replace

import kubernetes.client
import pytest

from catchup_assets.backends.kubernetes.connect import backend_client
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.profile import build_profile
from catchup_assets.mission.run import run_mission
from kit.control_plane import ControlPlane, bin_dir
from kit.k8s_backend import SETTINGS, B, mission, script
from kit.real_plane import ScaledClock, real_backend, runner_access, virtual_nodes
from kit.twin import check_twin, profile_differences
from kubesim.fault_proxy import FaultProxy

pytestmark = pytest.mark.k8s

RATE = 0.10
HANG = 1.5  # past the backend's 1 s request timeout; the stalled request still lands
SLACK = 60.0  # mission seconds (3 wall seconds at SCALE 20) a faulty pass may see the reclaim late or early


@pytest.fixture(scope="module")
def plane():
    with ControlPlane(bin_dir(), kwok=False, extra_args={"kube-apiserver": ["--watch-cache=false"]}) as plane:
        yield plane


class Compactor:
    """etcd compacted to its head every `every` wall seconds, as kube-apiserver's compactor does, faster."""

    def __init__(self, plane: ControlPlane, every: float = 0.5):
        self.plane, self.every, self.count, self._last = plane, every, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            if self.plane.etcd_revision() > self._last:  # etcd refuses a revision it has compacted already
                self._last = self.plane.compact_etcd()
                self.count += 1

    def __enter__(self) -> Compactor:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


def run(plane: ControlPlane, tmp_path, seed: int | None):
    """The twin mission in its own namespace through a FaultProxy; faults and compactions when `seed` is set."""
    ns = f"r2-{seed or 0}"
    plane.create_namespace(ns)
    started: Counter[tuple[str, str]] = Counter()

    def counted(pod: dict):
        labels = pod["metadata"]["labels"]
        started[(labels["catchup.stellar.org/range-key"], labels["catchup.stellar.org/attempt"])] += 1
        return script(pod)

    context = ssl.create_default_context(cafile=str(plane.ca_file))
    clock = ScaledClock()
    with FaultProxy(plane.server, context) as proxy, virtual_nodes(plane, clock, scripts=counted) as remote:
        injected = Counter()
        if seed is not None:
            injected = proxy.faults.at_random(RATE, seed, HANG, without=("status 410",))
            injected += remote.endpoints.faults.at_random(RATE, seed + 1000, HANG)
        config = kubernetes.client.Configuration(host=proxy.host)
        config.api_key = {"authorization": f"Bearer {plane.admin_token}"}  # passed through to the server
        with backend_client(config) as api, Compactor(plane, every=0.5 if seed else 1e9) as compactor:
            access = runner_access(plane, remote, tmp_path, ns)
            settings = replace(SETTINGS, namespace=ns)
            backend = real_backend(api, settings, access, tmp_path, clock, stats_interval=10, request_timeout=1.0)
            cfg = mission(tmp_path)
            result = run_mission(prepare(cfg), backend, clock=clock)
        assert remote.errors == 0
    injected += remote.endpoints.faults.injected if seed is not None else Counter()
    rows = build_profile(cfg.storage_root, "m1").profile.to_pylist()
    return cfg, result, rows, started, proxy, injected, compactor.count


@pytest.fixture(scope="module")
def clean(plane, tmp_path_factory):
    cfg, result, rows, started, *_ = run(plane, tmp_path_factory.mktemp("clean"), None)
    check_twin(cfg, result, slack=20.0)
    assert all(n == 1 for n in started.values())
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_R2_L5_L10_faults_and_compactions_on_the_real_plane_change_no_outcome(plane, clean, tmp_path, caplog, seed):
    caplog.set_level(logging.INFO, logger="catchup_assets")
    cfg, result, rows, started, proxy, injected, compactions = run(plane, tmp_path, seed)
    failed_passes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("mission m1: pass")]
    assert failed_passes == []  # no pass of the dispatcher raised
    assert not result.condemned.keys() - {"0059776001-0059840000"}, {
        k: str(v)[:600] for k, v in result.condemned.items()
    }
    check_twin(cfg, result, slack=SLACK)
    # On a wall clock two figures follow when passes ran: `wall_seconds` (the dispatcher's own clock,
    # from submit to record) and B's first leg, estimated from the pass that last saw it running (L22,
    # bounded by check_twin). Every other figure of the profile is the clean run's exactly.
    diff = profile_differences(rows, clean)
    loose = {B: {"seconds", "wall_seconds"}}
    assert {k: d for k, d in diff.items() if set(d) - loose.get(k, {"wall_seconds"})} == {}, diff
    assert all(n == 1 for n in started.values()), started  # no attempt started twice
    requests = proxy.requests.total
    print(f"R2 real plane seed {seed}: {injected.total()} faults in {requests} requests {dict(injected)}; "
          f"{compactions} compactions; the server answered {dict(proxy.answered)}")  # fmt: skip
    assert injected.total() >= 0.05 * requests  # the faults did happen
    expired = [r.getMessage() for r in caplog.records if "listing again" in r.getMessage() and "410" in r.getMessage()]
    assert expired, "no watch met a compacted revision"  # the real server's 410, from etcd
