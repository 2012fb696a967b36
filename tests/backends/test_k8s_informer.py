"""The backend's informer against the simulated API server (issue 26 item 2, L5, L10).

Jobs and pods are listed once and then watched; what goes wrong on a watch (410 as
HTTP and as an ERROR event, a body cut off, a reset, 429 and 5xx) relists or resumes
and the mission ends with the clean run's outcomes. A new backend (a restart) starts
with an empty cache and lists again (L10). Assertions are on the attempt records and
the requests the server received.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
from kubernetes.client import V1Job, V1Pod

from catchup_assets.backends.kubernetes.json_views import ModelView
from catchup_assets.backends.kubernetes.observe import attempt_state, doomed, kept_job, kept_pod
from catchup_assets.core.dispatch.ports import AttemptSpec, Peaks, Phase
from catchup_assets.core.size.sizing import Tiers
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import OUTCOMES, SETTINGS, C, SimClock, backend, mission, outcomes, sim_cluster
from kit.twin import check_twin


@pytest.fixture
def cluster():
    with sim_cluster() as c:
        yield c


class CompactingClock(SimClock):
    """The server's watch window compacted away at a few passes (etcd compaction): the next poll
    meets an ERROR event carrying a 410 Expired Status."""

    def __init__(self, kubelet, api, at: set[int]):
        super().__init__(kubelet)
        self.api, self.at, self.sleeps = api, at, 0

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        self.sleeps += 1
        if self.sleeps in self.at:
            self.api.store.watch.compact(int(self.api.store.resource_version))


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_issue26_watch_faults_relist_and_the_mission_ends_as_a_clean_run(cluster, tmp_path, seed):
    api, kubelet = cluster
    for resource in ("jobs", "pods"):
        api.faults.add(status=410, verb="watch", resource=resource, count=1)  # HTTP 410 on the request
        api.faults.add(truncate=True, verb="watch", resource=resource, count=2)  # cut off mid-body
        api.faults.add(reset=True, apply=False, verb="watch", resource=resource, count=1)
        api.faults.add(status=429, verb="watch", resource=resource, count=1, retry_after=0)
        api.faults.add(status=500 + 3 * (seed - 1), verb="watch", resource=resource, count=1)
    cfg = mission(tmp_path)
    clock = CompactingClock(kubelet, api, at={3 + seed, 9 + seed})
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=clock)
    assert api.faults.pending() == 0  # every fault was met
    assert result.condemned.keys() == {C}
    assert outcomes(cfg) == OUTCOMES
    check_twin(cfg, result)  # and the records and profile a clean run leaves, not just its outcomes
    # Relists: the first, then at most one per 410 (HTTP, or an ERROR event after a compaction
    # that passed the informer's resourceVersion), per 429/5xx that urllib3's own retry did
    # not absorb and per watch reset before it answered; a watch cut off mid-body resumes
    # from its last resourceVersion instead.
    for resource in ("jobs", "pods"):
        assert 2 <= api.requests.count("list", resource) <= 1 + 6, resource


def test_issue26_a_watch_that_never_opens_costs_a_list_a_pass_never_a_stale_view(cluster, tmp_path):
    """Every watch request reset before it answers (a proxy that drops long requests, or a server
    slower to answer than the informer waits): the backend lists each pass, as before the
    informer, and the mission ends as a clean run."""
    api, kubelet = cluster
    for resource in ("jobs", "pods"):
        api.faults.add(reset=True, apply=False, verb="watch", resource=resource, count=10**6)
    cfg = mission(tmp_path)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    assert result.condemned.keys() == {C} and outcomes(cfg) == OUTCOMES
    for resource in ("jobs", "pods"):
        assert api.requests.count("list", resource) >= result.passes - 1, resource


class RestartingClock(SimClock):
    """At a few passes, a second backend (a restarted process) is made and observes beside the first."""

    def __init__(self, kubelet, make, first, at: set[int]):
        super().__init__(kubelet)
        self.make, self.first, self.at, self.sleeps, self.compared = make, first, at, 0, []

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        self.sleeps += 1
        if self.sleeps in self.at:
            # Peaks are this process's own measurements (L20), flushed to records: not compared.
            def seen(b):
                return sorted((replace(s, peaks=Peaks()) for s in b.observe()), key=lambda s: s.attempt_id)

            self.compared.append((seen(self.make()), seen(self.first)))


def test_L10_a_restarted_backend_rebuilds_its_cache_from_a_list(cluster, tmp_path):
    api, kubelet = cluster
    cfg = mission(tmp_path)
    first = backend(api, kubelet, tmp_path)
    made = iter(range(100))
    clock = RestartingClock(kubelet, lambda: backend(api, kubelet, tmp_path / f"r{next(made)}"), first, {3, 8, 20})
    result = run_mission(prepare(cfg), first, clock=clock)
    assert result.condemned.keys() == {C} and outcomes(cfg) == OUTCOMES
    assert len(clock.compared) == 3 and any(fresh for fresh, _ in clock.compared)
    for fresh, cached in clock.compared:
        assert fresh == cached  # a fresh list says what the first backend's watched cache says
    # The first backend listed once; each restarted one listed once of its own.
    assert api.requests.count("list", "jobs") == api.requests.count("list", "pods") == 1 + 3


def test_issue26_a_job_this_backend_created_or_deleted_is_seen_so_though_the_watch_lags(cluster, tmp_path):
    """A watch poll that ends early (a busy server pausing, here a body cut off after one event)
    leaves the cache behind the server. The backend's own creates and deletes are in its view at
    once, as client-go's MutationCache and the controllers' expectations keep them: else the
    dispatcher would submit a Job it created again (a 409 each: 2000 extra creates at 2000 in
    flight, benchmarks.k8s_api) or see a released one again."""
    api, kubelet = cluster
    b = backend(api, kubelet, tmp_path)
    assert b.observe() == []  # the first read lists
    tier = Tiers().all()[0].name
    keys = ["0000000001-0000016000", "0000016001-0000032000", "0000032001-0000048000", "0000048001-0000064000"]
    specs = [AttemptSpec("m1", k, 1, int(k[11:]), 16320, 2**30, 2**30, tier) for k in keys]
    for s in specs[:3]:
        b.submit(s)
    api.faults.add(truncate=True, verb="watch", resource="jobs", count=1)  # one of the three ADDED arrives
    seen = b.observe()
    assert {s.attempt_id for s in seen} == {s.attempt_id for s in specs[:3]}
    assert api.requests.count("create", "jobs") == 3
    b.release(next(s for s in seen if s.range_key == keys[0]))
    b.submit(specs[3])  # its ADDED queued behind the DELETED...
    api.faults.add(truncate=True, verb="watch", resource="jobs", count=3)  # ...behind the two ADDED not yet read
    assert {s.range_key for s in b.observe()} == set(keys[1:])
    assert {s.range_key for s in b.observe()} == set(keys[1:])
    assert {s.range_key for s in b.observe()} == set(keys[1:])  # caught up: the DELETED came
    assert api.store.count("jobs", SETTINGS.namespace) == 3


def test_issue33_a_watch_answered_later_than_the_idle_is_read_once_not_sent_again(cluster, tmp_path):
    """A loaded server answers a watch's headers after the poll's idle (10 ms here): the poll waits
    for them as for any request and reads the stream, one watch a poll. With the idle as the read
    timeout, urllib3 took the late headers for a dead read and sent the GET again."""
    api, kubelet = cluster
    b = backend(api, kubelet, tmp_path)
    tier = Tiers().all()[0].name
    b.observe()  # the first read lists
    b.submit(AttemptSpec("m1", "0000000001-0000016000", 1, 16000, 16320, 2**30, 2**30, tier))
    api.faults.add(hang=0.2, verb="watch", resource="jobs", count=1)  # then answered
    watches = api.requests.count("watch", "jobs")
    assert [s.range_key for s in b.observe()] == ["0000000001-0000016000"]
    assert api.requests.count("watch", "jobs") == watches + 1
    assert api.requests.count("list", "jobs") == 1  # nor taken for a hung server: no relist


def test_issue26_L4_a_pod_watch_that_always_starts_late_is_caught_by_the_jobs(cluster, tmp_path):
    """Every pod watch answers its headers, then says nothing for longer than the informer waits
    (a busy apiserver gathering a backlog): each poll reads as silence, and the pod cache would
    never move. The Job controller's active counts say pods exist that the cache lacks, and a
    finished Job whose pod is still running in view says the same (pod_view.py): the backend lists
    the pods, so every attempt is recorded from its pod's terminated state, as a clean run records
    it (issue 34 item 4: not `ok ... est True ... CompletionsReached` from the Job alone), and
    peaks are still read (L19)."""
    api, kubelet = cluster
    api.faults.add(slow_body=0.2, verb="watch", resource="pods", count=10**6)
    cfg = mission(tmp_path)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=SimClock(kubelet))
    check_twin(cfg, result)  # the clean run's records, profile and tier map
    records, _ = RecordStore(Store(cfg.storage_root), "m1").load()
    assert all(r.peak_anon_bytes for r in records.values() if r.outcome == "ok")
    assert all("termination " in r.reason for r in records.values() if r.finished_at is not None), records
    assert 2 <= api.requests.count("list", "pods") < result.passes  # a LIST when a gap opens, not every pass


class TrimComparingClock(SimClock):
    """At every pass, each Job and pod the server holds is read into an attempt state twice: whole,
    and as the informers cache it (kept_job, kept_pod)."""

    def __init__(self, kubelet, api):
        super().__init__(kubelet)
        self.api, self.compared = api, []

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        with self.api.store.lock:
            jobs = copy.deepcopy(self.api.store.select("jobs", SETTINGS.namespace))
            pods = copy.deepcopy(self.api.store.select("pods", SETTINGS.namespace))
        by_job = {(p["metadata"].get("labels") or {}).get("job-name"): p for p in pods}
        for job in jobs:
            pod = by_job.get(job["metadata"]["name"])

            def state(j, p):
                view = ModelView(p, V1Pod) if p is not None else None
                return attempt_state(ModelView(j, V1Job), view), view is not None and doomed(view)

            trimmed = (kept_job(copy.deepcopy(job)), kept_pod(copy.deepcopy(pod)) if pod is not None else None)
            self.compared.append((state(job, pod), state(*trimmed)))


def test_issue26_item4_the_cache_keeps_every_field_the_backend_reads(cluster, tmp_path):
    """The informers cache each Job and pod trimmed to what is read (item 4: memory per attempt).
    Over a whole mission with every kind of outcome, a trimmed object gives the same attempt state
    (phase, evidence, limits, tier, node) and the same about-to-go verdict as the whole one."""
    api, kubelet = cluster
    cfg = mission(tmp_path)
    clock = TrimComparingClock(kubelet, api)
    result = run_mission(prepare(cfg), backend(api, kubelet, tmp_path), clock=clock)
    assert result.condemned.keys() == {C} and outcomes(cfg) == OUTCOMES
    assert len(clock.compared) > 10
    assert {s.phase for (s, _), _ in clock.compared} >= {Phase.RUNNING, Phase.FINISHED}
    assert any(s.memory_limit_bytes and s.tier for (s, _), _ in clock.compared)
    for whole, trimmed in clock.compared:
        assert trimmed == whole
