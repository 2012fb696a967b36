"""The backend's informer across a real 410 (issue 34 item 4): etcd compacted past the resourceVersion the
informer watches from, behind a kube-apiserver without its watch cache, so the watch goes to etcd itself."""

import logging

import pytest
from kubernetes.client import BatchV1Api, V1Job

from catchup_assets.backends.kubernetes.informer import Informer
from kit.control_plane import ControlPlane, bin_dir

pytestmark = pytest.mark.k8s

SELECTOR = "catchup.stellar.org/mission=m1"


def job(name: str) -> dict:
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
    labels = {"catchup.stellar.org/mission": "m1"}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"template": {"spec": pod}}}


def call(fn, *args, read=False, **kwargs):
    return fn(*args, _preload_content=False, **kwargs).data if read else fn(*args, **kwargs)


def test_L10_a_watch_from_a_compacted_revision_relists_and_misses_nothing(caplog):
    # Without the watch cache a watch is etcd's own: a compacted revision is answered 410 Expired.
    with ControlPlane(bin_dir(), kwok=False, extra_args={"kube-apiserver": ["--watch-cache=false"]}) as plane:
        plane.create_namespace("m")
        with plane.api_client() as api:
            batch = BatchV1Api(api)
            informer = Informer(batch.list_namespaced_job, call, "m", SELECTOR, V1Job, idle=0.2)
            assert informer.read() == {} and informer.relists == 1
            batch.create_namespaced_job("m", job("first"))
            assert set(informer.read()) == {"first"}  # watched, not listed
            stale = informer.resource_version
            batch.create_namespaced_job("m", job("second"))
            batch.delete_namespaced_job("first", "m", propagation_policy="Background")
            head = plane.compact_etcd()
            assert int(stale) < head
            caplog.set_level(logging.INFO, logger="catchup_assets.backends.kubernetes.informer")
            assert set(informer.read()) == {"second"}  # listed again, nothing missed
            assert informer.relists == 2
    (why,) = [r.getMessage() for r in caplog.records if "listing again" in r.getMessage()]
    assert "410" in why, why  # as the API server said it
