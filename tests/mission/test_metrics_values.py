"""Each alert's input on /metrics takes its value when the mission does the thing (issue 36 item 7):
the dispatcher driven into a stall, a breaker trip, a pause and a drain on the fake cluster, its
snapshots read through the same families /metrics serves. A ratio is absent until it has a denominator."""

from __future__ import annotations

from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.mission.metrics import families
from fakes import FAILED, OOM, Script
from kit.dispatch import KEYS, make


def watched(d):
    """The dispatcher's series after each pass, as a scrape would read them."""
    seen = []

    def on_pass(take):
        samples = [s for m in families(take()) for s in m.samples]
        seen.append({(s.name, tuple(v for k, v in s.labels.items() if k != "mission")): s.value for s in samples})

    d.on_pass = on_pass
    return seen


def test_issue36_Z4_catchup_stalled_is_1_while_the_mission_stalls_and_0_before(tmp_path):
    d, _, _ = make(tmp_path, lambda spec: Script(seconds=10_000), stall_seconds=300, stall_factor=2.0)
    seen = watched(d)
    for _ in range(100):  # 500 s of passes: every attempt in flight passes stall_seconds (300) at once
        d.pass_once()
        d.clock.sleep(5)
    stalled = [s[("catchup_stalled", ())] for s in seen]
    assert stalled[0] == 0 and stalled[-1] == 1  # a mutant reading 0 or 1 throughout fails here
    assert stalled.index(1) >= 55  # not before 300 s without a completion


def test_issue36_catchup_breaker_tripped_is_1_once_the_breaker_trips(tmp_path):
    d, _, _ = make(tmp_path, lambda spec: Script(observation=FAILED), breaker_attempts=3)
    seen = watched(d)
    d.run()
    tripped = [s[("catchup_breaker_tripped", ())] for s in seen]
    assert tripped[0] == 0 and tripped[-1] == 1


def test_issue36_catchup_paused_and_draining_follow_the_control_record(tmp_path):
    controls = iter([None, MissionControl(paused=True), MissionControl(drain=True)])
    d, _, _ = make(tmp_path, lambda spec: Script(seconds=1000))
    held = {"now": None}
    d.control._read = lambda: held["now"]  # the record as an operator leaves it, read once a pass
    seen = watched(d)
    for _ in range(3):
        held["now"] = next(controls)
        d.pass_once()
    flags = [(s[("catchup_paused", ())], s[("catchup_draining", ())]) for s in seen]
    assert flags == [(0, 0), (1, 0), (0, 1)]


def test_issue36_the_oom_hit_ratio_is_absent_until_a_range_is_decided(tmp_path):
    # The first attempt of every range is OOM-killed early; its retry at the next rung completes.
    d, _, _ = make(
        tmp_path, lambda spec: Script(seconds=30, observation=OOM) if spec.attempt == 1 else Script(seconds=60)
    )
    seen = watched(d)
    d.run()
    first_oom = next(i for i, s in enumerate(seen) if s.get(("catchup_attempts_total", ("oom",)), 0) > 0)
    assert ("catchup_oom_hit_ratio", ()) not in seen[first_oom]  # an OOM, no range decided: no ratio yet
    assert seen[-1][("catchup_oom_hit_ratio", ())] == 1.0  # at the end: every range was hit
    assert seen[-1][("catchup_ranges", ("done",))] == len(KEYS)
