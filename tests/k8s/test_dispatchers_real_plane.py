"""L11 on the real control plane: two dispatchers of one mission over disjoint ranges hold one cap between
them, counted from the Jobs the real API server holds (as tests/backends/test_k8s_backend.py on kubesim).

Both call the API through one FaultProxy that injects nothing: its request log counts what they sent."""

import ssl
from dataclasses import replace

import kubernetes.client
import pytest
from kubernetes.client import BatchV1Api

from catchup_assets.backends.kubernetes.connect import backend_client
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.units import GiB
from catchup_assets.mission.plan import prepare
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import SETTINGS, flat, mission
from kit.real_plane import ScaledClock, real_backend, runner_access, virtual_nodes
from kubesim.fault_proxy import FaultProxy
from kubesim.kube_script import Script

pytestmark = pytest.mark.k8s

NS = "catchup-l11"


def test_L11_two_dispatchers_share_one_cap_counted_from_the_real_servers_jobs(control_plane, tmp_path):
    control_plane.create_namespace(NS)
    clock = ScaledClock()
    context = ssl.create_default_context(cafile=str(control_plane.ca_file))
    scripts = lambda pod: Script(duration=100, memory=flat(1 * GiB, 2 * GiB))  # noqa: E731
    with (
        FaultProxy(control_plane.server, context) as proxy,
        virtual_nodes(control_plane, clock, scripts=scripts) as remote,
    ):
        config = kubernetes.client.Configuration(host=proxy.host)
        config.api_key = {"authorization": f"Bearer {control_plane.admin_token}"}
        with backend_client(config) as api:
            access = runner_access(control_plane, remote, tmp_path, NS)
            settings = replace(SETTINGS, namespace=NS, storage_mode="ephemeral")
            cfg = mission(tmp_path, parallelism=2)
            prepared = prepare(cfg)
            halves = [prepared.ordered[:2], prepared.ordered[2:]]
            dispatchers = [
                Dispatcher(
                    DispatchConfig(cfg, half),
                    real_backend(api, settings, access, tmp_path / f"d{i}", clock),
                    RecordStore(Store(cfg.storage_root), "m1"),
                    clock=clock,
                )
                for i, half in enumerate(halves)
            ]
            batch, most = BatchV1Api(api), 0
            for _ in range(80):
                statuses = [d.pass_once() for d in dispatchers]
                jobs = batch.list_namespaced_job(NS).items
                most = max(most, sum(1 for j in jobs if not (j.status and j.status.conditions)))
                if sum(s.completed for s in statuses) == 4 and not jobs:
                    break
                clock.sleep(10)
            assert most == 2  # one cap between them, counted from the Jobs themselves
            assert proxy.requests.count("create", "jobs") == 4  # each range once: no attempt made twice
        assert remote.errors == 0
    records, done = RecordStore(Store(cfg.storage_root), "m1").load()
    assert sorted(r.outcome for r in records.values()) == ["ok"] * 4 and len(done) == 4
