"""Backing off as the API server asks (issue 36 item 8): `Retry-After` on 429/503, one retry layer,
each wait capped, a pass's waits budgeted; spent, the pass is skipped, never failed.

The server is kubesim's API server answering 429 with `Retry-After` in both of kube-apiserver's forms:
API Priority and Fairness's rejection, Go's `http.Error` text/plain body (apiserver/pkg/server/filters/
priority-and-fairness.go calls maxinflight.go's `tooManyRequests`), and a handler's `Status` with
`details.retryAfterSeconds` (apierrors.NewTooManyRequests, the header set by responsewriters'
`ErrorNegotiated`). The backend's clients are built as a run builds them, through connect.py from a
kubeconfig, so urllib3's retry is the one a deployment has. Assertions are on what the server counted,
on the waits the injected sleeper was asked for (the clock is the boundary), and on the records.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import replace

import pytest
import yaml
from kubernetes.client import ApiException

from catchup_assets.backends.kubernetes.backend import KubernetesBackend
from catchup_assets.backends.kubernetes.backoff import WaitPolicy, next_wait
from catchup_assets.backends.kubernetes.connect import api_clients
from catchup_assets.core.dispatch.dispatch_config import SystemClock
from catchup_assets.core.dispatch.ports import TransientBackendError
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.size.sizing import Tiers
from catchup_assets.core.units import GiB
from catchup_assets.defs.resources import CatchupResource, KubernetesConfig
from catchup_assets.defs.resources.backend import backend_for
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import save_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import (
    IDENTITY,
    OUTCOMES,
    SETTINGS,
    WATCH_IDLE,
    B,
    C,
    D,
    SimClock,
    flat,
    kubelet_access,
    mission,
    outcomes,
    sim_cluster,
)
from kit.twin import check_twin
from kubesim.kube_script import Script

POLICY = WaitPolicy()  # 30 s a wait at most, 60 s a pass


@pytest.mark.parametrize(
    "status,header,spent,backoff,expected",
    [
        (429, "5", 0, 0.5, 5.0),  # as asked
        (503, "5", 0, 0.5, 5.0),  # a 503's Retry-After too
        (429, "3600", 0, 0.5, 30.0),  # capped
        (429, "3600", 30, 0.5, 30.0),  # the budget holds it exactly
        (429, "3600", 30.5, 0.5, None),  # it does not: give up
        (429, "5", 55, 0.5, 5.0),
        (429, "5", 56, 0.5, None),
        (429, "0", 59.9, 0.5, 0.0),  # at once: costs nothing
        (429, " 7 ", 0, 0.5, 7.0),
        (429, None, 0, 2.0, 2.0),  # no header: the backoff's delay
        (429, "Wed, 21 Oct 2015 07:28:00 GMT", 0, 2.0, 2.0),  # a date (never from kube-apiserver): the backoff
        (429, "-5", 0, 2.0, 2.0),
        (429, "1.5", 0, 2.0, 2.0),  # not delay-seconds
        (429, "\u0663", 0, 2.0, 2.0),  # a digit, but not an ASCII one
        (500, "5", 0, 2.0, 2.0),  # Retry-After is the server's word on 429 and 503 only
        (504, None, 0, 64.0, 30.0),  # a long backoff is capped too
        (None, None, 0, 1.0, 1.0),  # no answer (a reset, a timeout): the backoff
        (None, None, 59.5, 1.0, None),
    ],
)
def test_issue36_the_wait_policy_table(status, header, spent, backoff, expected):
    assert next_wait(status, header, spent, backoff, POLICY) == expected


@pytest.mark.parametrize(
    "kw,field",
    [
        ({"api_wait_cap_seconds": 0}, "api_wait_cap_seconds"),
        ({"api_wait_cap_seconds": float("nan")}, "api_wait_cap_seconds"),
        ({"api_wait_cap_seconds": 601, "api_wait_budget_seconds": 3600}, "api_wait_cap_seconds"),
        ({"api_wait_budget_seconds": 3601}, "api_wait_budget_seconds"),
        ({"api_wait_cap_seconds": 90, "api_wait_budget_seconds": 60}, "api_wait_cap_seconds"),
    ],
)
def test_issue36_a_wait_policy_out_of_bounds_is_refused_naming_the_setting(kw, field):
    with pytest.raises(ConfigError, match=field):
        WaitPolicy(**kw)


def kubeconfig(api, tmp_path) -> str:
    """A kubeconfig naming the simulated API server, as an operator's names a cluster."""
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "sim",
        "clusters": [{"name": "sim", "cluster": {"server": api.host}}],
        "users": [{"name": "sim", "user": {"token": "t"}}],
        "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}],
    }))  # fmt: skip
    return str(path)


def deployed_backend(api, kubelet, tmp_path, sleeper, **kw) -> KubernetesBackend:
    """The backend on clients built as a run builds them (connect.py), with `sleeper` for its waits."""
    batch, core = api_clients(kubeconfig(api, tmp_path), "")
    return KubernetesBackend(
        "m1",
        SETTINGS,
        Tiers(),
        batch_api=batch,
        core_api=core,
        kubelet=kubelet_access(kubelet),
        spool_dir=tmp_path / "spool",
        identity=IDENTITY,
        clock=kubelet.clock,
        sleeper=sleeper,
        stats_interval=10,
        watch_idle=WATCH_IDLE,
        **kw,
    )


def too_many(api, retry_after: int, apf: bool, verbs=("list",), resources=("jobs",)) -> None:
    """Every request of `verbs` on `resources` answered 429 with `Retry-After`, until cleared."""
    for verb in verbs:
        for resource in resources:
            api.faults.add(status=429, verb=verb, resource=resource, count=10**6, retry_after=retry_after, apf=apf)


@pytest.mark.parametrize("apf", [True, False], ids=["apf-text", "status-body"])
def test_issue36_a_429_stream_is_waited_out_as_asked_in_one_layer_then_the_pass_is_skipped(cluster, tmp_path, apf):
    api, kubelet = cluster
    too_many(api, retry_after=5, apf=apf)
    waits: list[float] = []
    b = deployed_backend(api, kubelet, tmp_path, waits.append)
    started = time.monotonic()
    with pytest.raises(TransientBackendError, match=r"list_namespaced_job: HTTP 429 \(Retry-After: 5\)"):
        b.observe()
    # One layer: the backend's 5 tries, each one request (urllib3 re-sent none, slept none in wall time).
    assert api.requests.count("list", "jobs") == 5
    assert waits == [5.0] * 4 and time.monotonic() - started < 5
    # What the server said, read as a client reads it: the header, and APF's body or a Status.
    with pytest.raises(ApiException) as answered:
        b.batch.list_namespaced_job(SETTINGS.namespace)
    assert answered.value.headers["Retry-After"] == "5"
    said = answered.value.body.decode() if isinstance(answered.value.body, bytes) else answered.value.body
    assert said.startswith("Too many requests, please try again later.") if apf else '"kind":"Status"' in said


def test_issue36_a_retry_after_of_an_hour_is_capped_and_the_pass_gives_up_at_its_budget(cluster, tmp_path):
    api, kubelet = cluster
    too_many(api, retry_after=3600, apf=True)
    waits: list[float] = []
    b = deployed_backend(api, kubelet, tmp_path, waits.append)
    with pytest.raises(TransientBackendError) as skipped:
        b.observe()
    assert waits == [30.0, 30.0]  # each capped at 30 s, 60 s in all: the third would overspend
    assert api.requests.count("list", "jobs") == 3
    assert "api_wait_budget_seconds" in str(skipped.value)
    waits.clear()
    api.faults.clear()
    assert b.observe() == [] and waits == []  # the next pass has its budget again, and is answered
    too_many(api, retry_after=3600, apf=True)
    (tmp_path / "b2").mkdir()
    b2 = deployed_backend(api, kubelet, tmp_path / "b2", waits.append, waits=WaitPolicy(10, 25))
    with pytest.raises(TransientBackendError, match="25 s"):
        b2.observe()
    assert waits == [10.0, 10.0]  # a deployment's own cap and budget


def deployment(api, kubelet, tmp_path, **waits) -> CatchupResource:
    """The deployment's resource on the simulated cluster, with its own `api_wait_*` settings."""
    access = kubelet_access(kubelet)
    k8s = KubernetesConfig(
        namespace=SETTINGS.namespace,
        image=SETTINGS.image,
        kubeconfig=kubeconfig(api, tmp_path),
        kubelet_ca_file=access.ca_file,
        kubelet_token_file=access.token_file,
        **waits,
    )
    return CatchupResource(
        backend="kubernetes", kubernetes=k8s, storage_root=str(tmp_path / "s"), work_dir=str(tmp_path)
    )


def test_issue36_the_deployment_s_cap_and_budget_reach_the_backend_a_run_builds(cluster, tmp_path):
    api, kubelet = cluster
    too_many(api, retry_after=3600, apf=True)
    waits: list[float] = []
    resource = deployment(api, kubelet, tmp_path, api_wait_cap_seconds=10, api_wait_budget_seconds=25)
    # A run builds the backend of a planned mission: its mission.json holds the nonce it signs with (issue 45).
    save_mission(Store(resource.root()), replace(mission(tmp_path), storage_root=resource.root()))
    with pytest.raises(TransientBackendError, match=r"25 s \(api_wait_budget_seconds, each wait at most 10 s\)"):
        backend_for(resource, "m1", sleeper=waits.append).observe()
    assert waits == [10.0, 10.0] and api.requests.count("list", "jobs") == 3


@pytest.mark.parametrize(
    "waits,field",
    [
        ({"api_wait_cap_seconds": 0}, "api_wait_cap_seconds"),
        ({"api_wait_budget_seconds": 86400}, "api_wait_budget_seconds"),
        ({"api_wait_cap_seconds": 120}, "api_wait_cap_seconds"),  # above the 60 s budget
    ],
)
def test_issue36_a_deployment_s_wait_settings_out_of_bounds_are_refused_at_load(cluster, tmp_path, waits, field):
    api, kubelet = cluster
    with pytest.raises(ValueError, match=field):
        deployment(api, kubelet, tmp_path, **waits)


class StormClock(SimClock):
    """The cluster's clock; from now on, every LIST and watch of Jobs and pods is answered 429 with
    `Retry-After` for `length` s of simulated time. The backend sleeps on it too: its waits pass that time."""

    def __init__(self, kubelet, api, retry_after: int, apf: bool, length: float = 60.0):
        super().__init__(kubelet)
        self.api, self.end = api, kubelet.clock() + length
        too_many(api, retry_after, apf, ("list", "watch"), ("jobs", "pods"))
        self.raging = True

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.raging and self.time() >= self.end:
            self.api.faults.clear()
            self.raging = False


@pytest.mark.parametrize("retry_after,apf", [(5, True), (3600, False)], ids=["5s-apf", "3600s-status"])
def test_issue36_a_minute_of_429s_on_every_list_slows_the_mission_and_it_ends_as_a_clean_run(
    cluster, tmp_path, caplog, retry_after, apf
):
    api, kubelet = cluster
    cfg = mission(tmp_path)
    clock = StormClock(kubelet, api, retry_after, apf)
    start = kubelet.clock()
    with caplog.at_level(logging.WARNING, logger="catchup_assets"):
        result = run_mission(prepare(cfg), deployed_backend(api, kubelet, tmp_path, clock.sleep), clock=clock)
    assert not clock.raging
    refused = [r for r in api.requests.recent if r[2] in ("list", "watch") and r[4] == 429]
    assert refused, "the storm was met"
    skipped = [r.getMessage() for r in caplog.records if "deferred to a later pass" in r.getMessage()]
    assert all("HTTP 429" in m for m in skipped)  # a pass skipped with a warning, never failed
    # 5 s: a pass's 5 tries wait 20 s and it is skipped, then a 10 s poll: twice in the minute. An hour,
    # capped: the first pass waits 30 s twice, within its 60 s budget, and its third try is answered.
    assert len(skipped) == (2 if retry_after == 5 else 0), skipped
    assert result.stopped is None and result.condemned.keys() == {C} and outcomes(cfg) == OUTCOMES
    stormy = kubelet.clock() - start
    with sim_cluster() as (api2, kubelet2):  # the same mission, never throttled
        cfg2, start2 = mission(tmp_path / "clean"), kubelet2.clock()
        (tmp_path / "clean").mkdir()
        clean = deployed_backend(api2, kubelet2, tmp_path / "clean", SimClock(kubelet2).sleep)
        run_mission(prepare(cfg2), clean, clock=SimClock(kubelet2))
        calm = kubelet2.clock() - start2
    assert outcomes(cfg2) == outcomes(cfg)
    print(f"makespan: {calm:g} s clean, {stormy:g} s through the storm")
    # Slowed: nothing was submitted for the minute; by no more than the minute, a pass's budget and a poll.
    assert calm + 60 <= stormy <= calm + 60 + 60 + cfg.poll_seconds


def test_issue36_L37_a_sigterm_during_a_wait_ends_it_and_the_run_stops_within_the_grace(cluster, tmp_path):
    """In wall time: the dispatcher's own clock, which a stop wakes (stopping.py), is the backend's sleeper, as
    a run wires them (defs/resources/backend.py). A real SIGTERM to this process, inside a 30 s wait."""
    api, kubelet = cluster
    too_many(api, retry_after=3600, apf=True)
    clock = SystemClock()
    sent: list[float] = []

    def sigterm_while_waiting() -> None:
        while api.requests.count("list", "jobs") == 0:
            time.sleep(0.01)
        time.sleep(0.5)  # inside the first wait, capped at 30 s
        sent.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=sigterm_while_waiting, daemon=True).start()
    cfg = mission(tmp_path)
    b = deployed_backend(api, kubelet, tmp_path, clock.sleep)
    result = run_mission(prepare(cfg), b, clock=clock, stop_grace_seconds=5)
    stopped_in = time.monotonic() - sent[0]
    assert result.stopped == "stopped by the operator (SIGTERM)"
    assert stopped_in < 2, stopped_in  # within the grace, not at the wait's end
    assert result.condemned == {} and {r.status for r in result.results.values()} == {"not_run"}
    assert api.store.count("jobs") == 0  # nothing was known, so nothing was submitted
    print(f"stopped {stopped_in:.2f} s after the SIGTERM")


class ThrottleThenSignal(SimClock):
    """At `at` s of simulated time, every delete of a Job is answered 429 (an hour asked), then a SIGTERM."""

    def __init__(self, kubelet, api, at: float):
        super().__init__(kubelet)
        self.api, self.at, self.sent = api, kubelet.clock() + at, False

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if not self.sent and self.time() >= self.at:
            self.sent = True
            too_many(self.api, 3600, True, ("delete",), ("jobs",))
            os.kill(os.getpid(), signal.SIGTERM)


def test_issue36_L37_a_stop_whose_deletes_are_throttled_ends_the_run_stopped_not_failed(cluster, tmp_path, caplog):
    api, kubelet = cluster
    kubelet.script = lambda job: Script(duration=300, memory=flat(1 * GiB, 2 * GiB))
    cfg = mission(tmp_path, parallelism=2)
    clock = ThrottleThenSignal(kubelet, api, at=60)
    with caplog.at_level(logging.ERROR, logger="catchup_assets"):
        result = run_mission(prepare(cfg, [B, D]), deployed_backend(api, kubelet, tmp_path, clock.sleep), clock=clock)
    assert result.stopped == "stopped by the operator (SIGTERM)" and result.condemned == {}
    # The API server refused every delete: both Jobs still run, and the stop says a later run adopts them.
    assert len(api.store.list("jobs", SETTINGS.namespace)) == 2
    said = [r.getMessage() for r in caplog.records if "still runs after the" in r.getMessage()]
    assert len(said) == 2, said


class LogStormClock(SimClock):
    """For `length` s of simulated time from the start, every read of a pod's log is answered 429."""

    def __init__(self, kubelet, api, length: float):
        super().__init__(kubelet)
        self.api, self.end, self.raging = api, kubelet.clock() + length, True
        too_many(api, 5, True, ("get",), ("pods/log",))

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.raging and self.time() >= self.end:
            self.api.faults.clear()
            self.raging = False


def test_issue36_a_throttled_final_log_read_waits_for_a_later_pass_and_the_records_are_a_clean_run_s(cluster, tmp_path):
    """urllib3 no longer waits out a 429 on a log read: the backend's one layer does, and past the pass's
    budget the final read is deferred to a later pass (L31), never recorded without the log."""
    api, kubelet = cluster
    cfg = mission(tmp_path)
    clock = LogStormClock(kubelet, api, length=300)
    result = run_mission(prepare(cfg), deployed_backend(api, kubelet, tmp_path, clock.sleep), clock=clock)
    assert not clock.raging
    assert [r for r in api.requests.recent if r[3] == "pods/log" and r[4] == 429], "the storm was met"
    # Slack: a pass's waits pass simulated time, so B's reclaimed a1 was last seen running a little later.
    check_twin(cfg, result, slack=10)
    with sim_cluster() as (api2, kubelet2):  # the same mission, never throttled
        (tmp_path / "clean").mkdir()
        clean = mission(tmp_path / "clean")
        calm = SimClock(kubelet2)
        run_mission(prepare(clean), deployed_backend(api2, kubelet2, tmp_path / "clean", calm.sleep), clock=calm)
    assert from_the_logs(cfg) == from_the_logs(clean)  # e.g. C's last error, a1 of A's tx count


def from_the_logs(cfg) -> dict:
    """What each attempt's record took from its log: tx count, resume, and the last error in its reason."""
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    return {
        ident: (r.tx_apply_count, r.fresh_start, r.resumed_from_ledger, r.reason.partition("last error: ")[2])
        for ident, r in records.items()
    }
