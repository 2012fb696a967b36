"""R2: one request in ten goes wrong, and the mission ends as a clean run does (L5, T1).

The simulated API server misbehaves at random on 10% of requests, seeded, in every
way a real one and its network do: 429/500/503/504 with their Status bodies, a reset
before the request is performed and one after it was (the create happened; its retry
meets a 409), a stall past the client's timeout after which the request still takes
effect, a body cut off mid-read on GETs, LISTs and watches, and 410 Gone on LISTs, watches and
deletes (issue 26 item 2: the backend lists once, then watches).
No pass of the dispatcher may fail, no attempt may start twice, and the outcomes and
profile must be the clean run's.
"""

from __future__ import annotations

import logging
import time
from collections import Counter

import pytest

from catchup_assets.core.dispatch.ports import TransientBackendError
from chaos import KEYS, SimClock, Watch, backend, cluster, dispatcher, mission, profile

C = KEYS[2]
RATE = 0.10


def faulty_mission(tmp_path, seed: int | None):
    with cluster() as (api, kubelet, runs):
        cfg = mission(tmp_path)
        injected, at_kubelets = Counter(), Counter()
        if seed is not None:
            injected = api.faults.at_random(RATE, seed, timeout_hang=0.3)
            at_kubelets = kubelet.endpoints.faults.at_random(RATE, seed + 1000, timeout_hang=0.3)
        watch = Watch(api, cfg)
        # A client timeout of 0.2 s, so a stalled request costs the test little real time.
        be = backend(api, kubelet, tmp_path / "spool", request_timeout=0.2)
        result = dispatcher(cfg, be, SimClock(kubelet, watch), "run-1").run()
        watch.check_records()
        requests = api.requests.total + kubelet.endpoints.requests.total
        return result, profile(cfg), runs.doubled, watch, injected + at_kubelets, requests


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    result, rows, *_ = faulty_mission(tmp_path_factory.mktemp("clean"), None)
    return result, rows


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_R2_L5_faults_on_a_tenth_of_requests_change_no_outcome(tmp_path, clean, caplog, seed):
    caplog.set_level(logging.ERROR, logger="catchup_assets.core.dispatch.reconciler")
    clean_result, clean_rows = clean
    result, rows, doubled, watch, injected, requests = faulty_mission(tmp_path, seed)
    failed_passes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("mission m1: pass")]
    assert failed_passes == []  # no pass of the dispatcher raised
    assert sorted(result.done) == sorted(clean_result.done) and result.condemned.keys() == {C}
    assert doubled == [] and watch.two_live == [] and watch.lowered == []
    assert rows.rows == clean_rows.rows
    print(f"R2 seed {seed}: {injected.total()} faults in {requests} requests: {dict(injected)}")
    assert injected.total() >= 0.05 * requests  # the faults did happen
    assert len(injected) == 9  # every kind, in each seed


@pytest.mark.timeout(30)
def test_issue45_item8_the_chaos_backend_gives_a_pass_up_at_the_wait_budget_under_429_retry_after_3600(tmp_path):
    """Issue 45, failure 29: the harness's backend is production's client (connect.py), so every call
    answered `429 Retry-After: 3600` ends the pass at the 60 s wait budget, on the injected clock, in
    the backend's tries. Its own ApiClient's urllib3 Retry slept each Retry-After out in wall
    time (an hour here: the timeout fails it) under the backend's tries."""
    with cluster() as (api, kubelet, _):
        api.faults.add(status=429, count=10**6, retry_after=3600, apf=True)  # every verb, every resource
        clock = SimClock(kubelet)
        be = backend(api, kubelet, tmp_path / "spool", sleeper=clock.sleep)
        simulated, wall = clock.time(), time.monotonic()
        with pytest.raises(TransientBackendError, match="api_wait_budget_seconds"):
            be.observe()
        assert clock.time() - simulated == 60.0  # two waits, each capped at 30 s: the budget, spent
        assert time.monotonic() - wall < 10
        # What the server received: the namespace check's three tries (30 s and 30 s between them), then the
        # LIST's one, refused by the spent budget. Each try one request: urllib3 re-sent none.
        asked = [(verb, resource, code) for _, _, verb, resource, code in api.requests.recent]
        assert asked == [("get", "namespaces", 429)] * 3 + [("list", "jobs", 429)]
