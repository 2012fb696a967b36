"""R2: one request in ten goes wrong, and the mission ends as a clean run does (L5, T1).

The simulated API server misbehaves at random on 10% of requests, seeded, in every
way a real one and its network do: 429/500/503/504 with their Status bodies, a reset
before the request is performed and one after it was (the create happened; its retry
meets a 409), a stall past the client's timeout after which the request still takes
effect, a body cut off mid-read on GETs and LISTs, and 410 Gone on LISTs and deletes.
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
        injected = api.faults.at_random(RATE, seed, timeout_hang=0.3) if seed is not None else Counter()
        watch = Watch(api, cfg)
        # A client timeout of 0.2 s, so a stalled request costs the test little real time.
        be = backend(api, kubelet, tmp_path / "spool", request_timeout=0.2)
        result = dispatcher(cfg, be, SimClock(kubelet, watch), "run-1").run()
        watch.check_records()
        return result, profile(cfg), runs.doubled, watch, Counter(injected), api.requests.total


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    result, rows, *_ = faulty_mission(tmp_path_factory.mktemp("clean"), None)
    return result, rows


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_R2_L5_faults_on_a_tenth_of_requests_change_no_outcome(tmp_path, clean, seed, caplog):
    caplog.set_level(logging.ERROR, logger="catchup_assets.dispatch")
    result, rows, doubled, watch, injected, requests = faulty_mission(tmp_path, seed)
    clean_result, clean_rows = clean
    print(f"R2 seed {seed}: {injected.total()} faults in {requests} requests: {dict(injected)}")
    failed_passes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("mission m1: pass")]
    assert failed_passes == []  # no pass of the dispatcher raised
    assert sorted(result.done) == sorted(clean_result.done) and result.condemned.keys() == {C}
    assert doubled == [] and watch.two_live == [] and watch.lowered == []
    assert rows.rows == clean_rows.rows
    assert injected.total() >= 0.05 * requests and len(injected) >= 8  # the faults did happen, of most kinds
