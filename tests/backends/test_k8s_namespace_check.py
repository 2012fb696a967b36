"""The mission namespace's Pod Security label, checked by the dispatcher's first pass (issue 24).

Real dispatcher passes against the simulated API server (T1): the namespace is what the server
holds (a GET of one never created finds it bare, as `kubectl create namespace` makes it), and
the assertions are on the warnings the run logs, the requests the server received, and the
mission's outcome, which the check never changes.
"""

from __future__ import annotations

import logging

import pytest
from kubernetes.client import CoreV1Api, V1Namespace, V1ObjectMeta

from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from kit.k8s_backend import NS, SPAN, SimClock, backend, medida, mission, sim_cluster
from kubesim.kube_script import Script

LABEL = "pod-security.kubernetes.io/enforce"
ONE_RANGE = MissionSpan(SPAN.first_ledger, SPAN.first_ledger + 63_999, ledgers_per_range=64_000, overlap=320)
FRESH = "RESUME DECLINED: no range marker in the data dir (never started here)"
FORBIDDEN = (
    f'namespaces "{NS}" is forbidden: User "system:serviceaccount:catchup:cu-mission" cannot get resource '
    '"namespaces" in API group "" at the cluster scope'
)


@pytest.fixture
def cluster():
    with sim_cluster() as (api, kubelet):
        kubelet.script = lambda job: Script(duration=30, lines=[FRESH, *medida(100)])
        yield api, kubelet


def run(api, kubelet, tmp_path, caplog) -> list[str]:
    """One mission of one range; the warnings the run logged about the namespace."""
    caplog.set_level(logging.INFO, logger="catchup_assets.backends.kubernetes.backend")
    health: list[tuple[str, bool, str]] = []
    cfg = mission(tmp_path, span=ONE_RANGE)
    result = run_mission(
        prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet), on_health=lambda *h: health.append(h)
    )
    assert len(result.done) == 1 and result.condemned == {}  # an alert, never a failure
    assert not [h for h in health if not h[1]], health  # and no health check failed for it
    assert api.requests.count("get", "namespaces") == 1  # read once, on the first pass, not every pass
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and "namespace" in r.getMessage()]


def label(api, labels: dict[str, str]) -> None:
    CoreV1Api(api.api_client).create_namespace(V1Namespace(metadata=V1ObjectMeta(name=NS, labels=labels)))


def test_an_unlabelled_mission_namespace_is_alerted_naming_it_and_the_label(cluster, tmp_path, caplog):
    api, kubelet = cluster
    (warning,) = run(api, kubelet, tmp_path, caplog)
    assert f"namespace {NS} is not labelled {LABEL}=restricted" in warning and "no such label" in warning


def test_a_namespace_enforcing_a_weaker_profile_is_alerted_naming_what_it_enforces(cluster, tmp_path, caplog):
    api, kubelet = cluster
    label(api, {LABEL: "baseline", "pod-security.kubernetes.io/warn": "restricted"})
    (warning,) = run(api, kubelet, tmp_path, caplog)
    assert f"namespace {NS} is not labelled {LABEL}=restricted" in warning and "'baseline'" in warning


def test_a_restricted_namespace_gives_no_alert(cluster, tmp_path, caplog):
    api, kubelet = cluster
    label(api, {LABEL: "restricted", f"{LABEL}-version": "latest"})
    assert run(api, kubelet, tmp_path, caplog) == []


def test_a_forbidden_read_is_a_warning_naming_the_verb_to_grant(cluster, tmp_path, caplog):
    api, kubelet = cluster
    label(api, {LABEL: "restricted"})
    api.faults.add(status=403, verb="get", resource="namespaces", message=FORBIDDEN)
    (warning,) = run(api, kubelet, tmp_path, caplog)
    assert "may not `get` namespaces (Forbidden)" in warning and f"resourceNames [{NS}]" in warning


def test_a_namespace_the_api_server_cannot_answer_for_now_is_read_on_a_later_pass(cluster, tmp_path, caplog):
    """Unanswered past every retry on the first pass: the next pass reads it, and alerts once."""
    api, kubelet = cluster
    api.faults.add(status=503, verb="get", resource="namespaces", count=5)  # the first pass's call and 4 retries
    caplog.set_level(logging.INFO, logger="catchup_assets.backends.kubernetes.backend")
    result = run_mission(prepare(mission(tmp_path, span=ONE_RANGE)), backend(api, kubelet, tmp_path),
                         clock=SimClock(kubelet))  # fmt: skip
    assert len(result.done) == 1 and api.faults.pending() == 0
    assert api.requests.count("get", "namespaces") == 6
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING and LABEL in r.getMessage()]
    assert len(warnings) == 1 and "no such label" in warnings[0]
