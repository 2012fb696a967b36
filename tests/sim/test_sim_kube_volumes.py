"""The worker's log on its data volume, in the simulated cluster (L31).

Jobs and PVCs are the backend's own manifests, sent through the official
client: the kubelet finds the data volume and the attempt from them as the
real entrypoint does (DATA_DIR, CATCHUP_ATTEMPT). Assertions are on what the
API serves and what the volume holds.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from kubernetes.client import BatchV1Api, CoreV1Api

from catchup_assets.backends.kubernetes import manifests as m
from catchup_assets.backends.kubernetes import names as n
from catchup_assets.backends.kubernetes.settings import K8sSettings
from catchup_assets.core.dispatch.ports import AttemptSpec
from catchup_assets.core.measure import shipped
from catchup_assets.core.units import GiB
from kubesim.kube_api import KubeApiServer
from kubesim.kube_script import Script
from kubesim.kubelet import Kubelet

NS = "catchup"
KEY = "0059904001-0059968000"
SETTINGS = K8sSettings(namespace=NS, image="stellar/stellar-core:22", pooled=False)  # any node will do
FIRST = ["RESUME DECLINED: no range marker in the data dir (never started here)", "{now} [History INFO] applying"]


def spec(attempt: int) -> AttemptSpec:
    return AttemptSpec("m1", KEY, attempt, 59_968_000, 64_320, 2 * GiB, 2 * GiB, "nebula")


@pytest.fixture
def sim():
    scripts: dict[int, Script] = {}
    with KubeApiServer() as api:
        kubelet = Kubelet(api.store, script=lambda job: scripts[int(job["metadata"]["labels"][n.LABEL_ATTEMPT])])
        kubelet.add_node("n1")
        core = CoreV1Api(api.api_client)
        core.create_namespaced_config_map(NS, m.configmap_manifest("m1", SETTINGS, "", ""))  # the pods mount it
        yield api, kubelet, BatchV1Api(api.api_client), core, scripts


def pod_log(core: CoreV1Api, attempt: int) -> list[str]:
    [pod] = core.list_namespaced_pod(NS, label_selector=f"{n.LABEL_ATTEMPT}={attempt}").items
    resp = core.read_namespaced_pod_log(pod.metadata.name, NS, container=n.CONTAINER, _preload_content=False)
    return resp.data.decode().splitlines()


def test_L31_a_reclaimed_attempt_s_log_stays_on_its_pvc_and_the_next_attempt_ships_it(sim):
    api, kubelet, batch, core, scripts = sim
    core.create_namespaced_persistent_volume_claim(NS, m.pvc_manifest("m1", KEY, SETTINGS))
    # Attempt 1 prints two lines, then its node is reclaimed at 50 s: a third line never comes.
    lines = [(0, FIRST[0]), (10, FIRST[1]), (60, "never printed")]
    scripts[1] = Script(duration=50, disrupt="TerminationByKubelet", disrupt_mode="node_gone", lines=lines)
    batch.create_namespaced_job(NS, m.job_manifest(spec(1), None, False, SETTINGS))
    kubelet.advance(70 + 40)  # and PodGC's quarantine
    assert api.store.count("pods") == 0 and api.store.count("nodes") == 0  # the pod went after its node
    [claim] = api.store.select("persistentvolumeclaims", NS)
    volume = f"pvc:{claim['metadata']['uid']}"
    left = kubelet.volumes.files(volume)["logs/a001.log"]
    assert len(left) == 2 and left[0] == FIRST[0] and left[1].endswith(" [History INFO] applying")

    kubelet.add_node("n2")
    scripts[2] = Script(duration=30, lines=["RESUME: range x from LCL 59940000 toward target 59968000"])
    batch.create_namespaced_job(NS, m.job_manifest(spec(2), None, False, SETTINGS))
    kubelet.advance(40)
    # The next pod's log opens with attempt 1's file exactly as entrypoint.sh prints it, then its own.
    printed = shipped.section(1, "logs/a001.log", "".join(f"{ln}\n" for ln in left).encode())
    assert pod_log(core, 2) == [*printed.decode().split("\n")[:-1], scripts[2].lines[0]]
    assert kubelet.volumes.files(volume) == {"logs/a001.log.shipped": left, "logs/a002.log": [scripts[2].lines[0]]}

    # The files go with the claim.
    batch.delete_namespaced_job(n.job_name("m1", KEY, 2), NS, propagation_policy="Background")
    core.delete_namespaced_persistent_volume_claim(n.pvc_name("m1", KEY), NS)
    kubelet.step()
    assert kubelet.volumes.files(volume) == {}


def test_L31_an_emptydir_log_goes_with_its_pod(sim):
    api, kubelet, batch, core, scripts = sim
    ephemeral = replace(SETTINGS, storage_mode="ephemeral")
    scripts[1] = Script(duration=20, exit_code=1, lines=["one line"])
    scripts[2] = Script(duration=20, lines=["fresh volume"])
    batch.create_namespaced_job(NS, m.job_manifest(spec(1), None, False, ephemeral))
    kubelet.advance(25)
    assert pod_log(core, 1) == ["one line"]
    batch.delete_namespaced_job(n.job_name("m1", KEY, 1), NS, propagation_policy="Background")
    batch.create_namespaced_job(NS, m.job_manifest(spec(2), None, False, ephemeral))
    kubelet.advance(25)
    assert pod_log(core, 2) == ["fresh volume"]  # nothing to ship: attempt 1's emptyDir went with its pod
