"""A parallel first pass and the client's request rate, against the simulated API server (issue 26 item 3).

The Kubernetes backend lets the dispatcher submit several attempts at once
(`submit_concurrency`); each attempt's record is still durable before its Job
exists (L32), every range still has one live attempt and each attempt number is
created once (L11). Every request waits for its token (throttle.py), on the
backend's injected clock.
"""

from __future__ import annotations

import threading

import pytest
from kubernetes.client import BatchV1Api

from catchup_assets.backends.kubernetes.names import LABEL_ATTEMPT, LABEL_RANGE_KEY
from catchup_assets.backends.kubernetes.throttle import RequestRate
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import OUTCOMES, C, SimClock, backend, mission, outcomes, sim_cluster


@pytest.fixture
def cluster():
    with sim_cluster() as c:
        yield c


class RecordFirstBatchApi(BatchV1Api):
    """The API client as the backend holds it; each Job create, on its way to the server, checks
    that the attempt's record is already on the storage root."""

    def __init__(self, api_client, records: RecordStore, seen: list):
        super().__init__(api_client)
        self.records, self.seen, self.threads = records, seen, set()

    def create_namespaced_job(self, namespace, body, **kw):
        labels = body["metadata"]["labels"] if isinstance(body, dict) else body.metadata.labels
        key, attempt = labels[LABEL_RANGE_KEY], int(labels[LABEL_ATTEMPT])
        self.seen.append((key, attempt, self.records.read_one(key, attempt) is not None))
        self.threads.add(threading.current_thread().name)
        return super().create_namespaced_job(namespace, body, **kw)


def test_issue26_a_parallel_first_pass_starts_each_attempt_once_each_behind_its_durable_record(cluster, tmp_path):
    api, kubelet = cluster
    api.latency = 0.02  # each request takes a while, as over a network: submits overlap
    cfg = mission(tmp_path)  # every range at once: the first pass submits them all
    seen: list = []
    b = backend(api, kubelet, tmp_path, submit_concurrency=8)
    b.batch = RecordFirstBatchApi(b.batch.api_client, RecordStore(Store(cfg.storage_root), "m1"), seen)  # its client
    b._jobs.list_fn = b.batch.list_namespaced_job
    result = run_mission(prepare(cfg), b, clock=SimClock(kubelet))
    assert result.condemned.keys() == {C} and outcomes(cfg) == OUTCOMES  # as the serial run's
    assert len(b.batch.threads) > 1  # the first pass's submits ran at once, on the submit pool
    assert seen and all(durable for _, _, durable in seen)  # L32: the record first, then the Job
    assert len(seen) == len(set((k, a) for k, a, _ in seen)) == api.requests.count("create", "jobs")  # L11
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    assert len(records) == len(seen)  # each created attempt has its record, none more


class VirtualTime:
    """The throttle's clock and sleeper: sleeping moves the clock, nothing sleeps in wall time."""

    def __init__(self) -> None:
        self.now = 0.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_issue26_the_backend_s_requests_keep_to_its_qps_after_the_burst(cluster, tmp_path):
    api, kubelet = cluster
    t, qps, burst = VirtualTime(), 20.0, 5
    cfg = mission(tmp_path)  # every range at once: the first pass submits them all
    b = backend(api, kubelet, tmp_path, submit_concurrency=4, throttle=RequestRate(qps, burst, t.clock, t.sleep))
    result = run_mission(prepare(cfg), b, clock=SimClock(kubelet))
    assert result.condemned.keys() == {C} and outcomes(cfg) == OUTCOMES
    sent = api.requests.total - api.requests.count("get", "version")  # the client's own /version probe aside
    assert sent > 3 * burst
    # Every request the server received took a token: the burst at once, then one every 1/qps s.
    assert t.now == pytest.approx((sent - burst) / qps, rel=0.05)


@pytest.mark.parametrize(
    "qps, burst, field",
    [(0, 5, "api_qps"), (-1.0, 5, "api_qps"), (10, 0, "api_burst"), (10, 2.5, "api_burst"), (10, True, "api_burst")],
)
def test_issue26_a_bad_rate_is_refused_naming_the_field(qps, burst, field):
    with pytest.raises(ValueError, match=field):
        RequestRate(qps, burst, lambda: 0.0, lambda s: None)


@pytest.mark.parametrize(
    "qps, burst, times, delays",
    [
        # the burst at once, then one token every 1/qps s
        (10, 2, [0, 0, 0, 0], [0, 0, 0.1, 0.2]),
        # tokens refill while idle, never beyond the burst
        (10, 2, [0, 0, 10, 10, 10], [0, 0, 0, 0, 0.1]),
        # a caller already due waits nothing
        (1, 1, [0, 1, 2.5], [0, 0, 0]),
    ],
)
def test_issue26_request_rate_reservations(qps, burst, times, delays):
    now = iter(times)
    rate = RequestRate(qps, burst, lambda: next(now), lambda s: None)
    assert [round(rate.reserve(), 6) for _ in times] == delays
