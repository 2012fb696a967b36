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
from collections import Counter

import pytest

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
