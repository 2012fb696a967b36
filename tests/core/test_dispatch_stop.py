"""An operator's stop in the dispatcher itself (L37), with the fake backend and clock.

`stop()` is what the signal handler calls (mission/stop_signals.py); here it is called
from inside a submit, as a signal landing mid-pass would be. The fake backend's
shutdown removes its live attempts outright, as deleting Jobs does on a cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from catchup_assets.core.classify.outcomes import decide
from catchup_assets.core.dispatch.range_book import past_attempts
from fakes import OOM, FakeBackend, FakeClock, Script
from kit.dispatch import KEYS, make


@dataclass
class StoppingBackend(FakeBackend):
    """Calls `on_submit(n)` after its n-th submit; its shutdown deletes what is live."""

    on_submit: object = None
    shutdowns: int = 0

    def submit(self, spec):
        super().submit(spec)
        if self.on_submit:
            self.on_submit(len(self.submitted))

    def shutdown(self, grace: float) -> list[str]:
        self.shutdowns += 1
        for s in [s for s in self.observe() if s.live]:
            del self.attempts[s.attempt_id]
        return []


def chains(records):
    recs, done = records.load()
    assert done == set(recs)
    out: dict[str, list[str]] = {}
    for (key, _attempt), rec in sorted(recs.items()):
        out.setdefault(key, []).append(rec.outcome)
    return recs, out


def test_L37_a_stop_mid_pass_dispatches_nothing_more_records_the_live_attempts_stopped_and_a_new_run_completes(
    tmp_path,
):
    clock = FakeClock()
    # Two tip ranges OOM at once on their own (charged: a rung each), freeing two slots for pass 2.
    oom_first = {KEYS[0], KEYS[1]}
    backend = StoppingBackend(
        clock,
        lambda spec: Script(3, OOM) if spec.attempt == 1 and spec.range_key in oom_first else Script(100),
    )
    d, _, records = make(tmp_path, parallelism=3, backend=backend, clock=clock)
    # The signal lands in pass 2, right after its first submit (the retry of KEYS[0]).
    backend.on_submit = lambda n: n == 4 and d.stop("stopped by the operator (SIGTERM)")
    result = d.run()
    assert result.stopped == "stopped by the operator (SIGTERM)"
    # Not one dispatch more: KEYS[1]'s retry, due in the same pass, was never submitted.
    assert [(s.range_key, s.attempt) for s in backend.submitted[3:]] == [(KEYS[0], 2)]
    assert backend.shutdowns == 1 and backend.attempts == {}
    assert result.condemned == {} and result.done == []
    recs, by_key = chains(records)
    assert by_key == {KEYS[0]: ["oom", "stopped"], KEYS[1]: ["oom"], KEYS[2]: ["stopped"]}
    assert all(
        r.reason.startswith("stopped by the operator (SIGTERM)") for r in recs.values() if r.outcome == "stopped"
    )
    for key in (KEYS[0], KEYS[2]):
        mine = {a: r for (k, a), r in recs.items() if k == key}
        spent = {g: n for g, n in decide(past_attempts(mine, set(mine)), d.mission.retry).counts.items() if n}
        assert spent == ({"oom": 1} if key == KEYS[0] else {})  # the stop spent nothing; the OOM its rung
    assert {r.reason for r in result.results.values()} == {
        "not run to the end: stopped by the operator (SIGTERM); a later run resumes it"
    }

    again, backend2, _ = make(tmp_path, parallelism=3, clock=clock)
    result2 = again.run()
    assert result2.stopped is None and sorted(result2.done) == sorted(KEYS) and result2.condemned == {}
    _, by_key = chains(records)
    assert [by_key[k] for k in KEYS[:3]] == [["oom", "stopped", "ok"], ["oom", "ok"], ["stopped", "ok"]]
    # The OOMed range resumes on the rung it had reached, as if the stopped attempt had never run.
    assert [s.memory_limit_bytes for s in backend2.submitted if s.range_key == KEYS[0]] == [
        backend.submitted[3].memory_limit_bytes
    ]


def test_L37_stopped_before_the_first_pass_dispatches_nothing(tmp_path):
    d, backend, records = make(tmp_path)
    d.stop("stopped by the operator (SIGINT)")
    result = d.run()
    assert backend.submitted == [] and records.load() == ({}, set())
    assert result.stopped == "stopped by the operator (SIGINT)" and result.condemned == {}


@dataclass
class SupervisedBackend(FakeBackend):
    """Its shutdown ends each live attempt as the local supervisor does, with a `stopped` verdict
    left behind (exit 3, StoppedByOperator), to be read and recorded; the first final read fails."""

    def shutdown(self, grace: float) -> list[str]:
        from dataclasses import replace

        from catchup_assets.core.classify.outcomes import STOP_CONDITION, Observation

        verdict = Observation(exit_code=3, termination_reason="Error", conditions=frozenset({STOP_CONDITION}))
        for a in self.attempts.values():
            if self.clock.time() < a.started + a.script.seconds:
                a.script = replace(a.script, seconds=self.clock.time() - a.started, observation=verdict)
        self.collect_errors = 1
        return []


def test_L37_an_attempt_the_stop_ended_is_recorded_in_this_run_though_its_first_final_read_fails(tmp_path):
    clock = FakeClock()
    backend = SupervisedBackend(clock, lambda spec: Script(100))
    d, _, records = make(tmp_path, parallelism=3, backend=backend, clock=clock)
    backend_submit = backend.submit

    def submit(spec):
        backend_submit(spec)
        if len(backend.submitted) == 3:
            d.stop("stopped by the operator (SIGTERM)")

    backend.submit = submit
    result = d.run()
    assert result.stopped and result.condemned == {}
    recs, by_key = chains(records)  # every record done-marked: none left for a later run to explain
    assert sorted(by_key) == sorted(KEYS[:3]) and all(v == ["stopped"] for v in by_key.values())


@dataclass
class RacingBackend(SupervisedBackend):
    """Its first shutdown returns with one attempt still running, as a local supervisor that
    took its start gate while the stop fenced the others; later shutdowns end it too."""

    shutdowns: int = 0

    def shutdown(self, grace: float) -> list[str]:
        self.shutdowns += 1
        if self.shutdowns > 1:
            return super().shutdown(grace)
        racer = max(self.attempts)
        saved = self.attempts.pop(racer)
        super().shutdown(grace)
        self.attempts[racer] = saved
        self.collect_errors = 0
        return []


def test_L37_an_attempt_still_running_after_the_shutdown_returned_is_shut_down_again_and_recorded(tmp_path):
    # The CI failure it pins: the last-submitted attempt was left with only its start record.
    clock = FakeClock()
    backend = RacingBackend(clock, lambda spec: Script(100))
    d, _, records = make(tmp_path, parallelism=3, backend=backend, clock=clock)
    backend.on_submit = None
    submit = backend.submit
    backend.submit = lambda spec: (submit(spec), len(backend.submitted) == 3 and d.stop("stopped by the operator"))
    result = d.run()
    assert result.condemned == {} and backend.shutdowns == 2
    _, by_key = chains(records)
    assert sorted(by_key) == sorted(KEYS[:3]) and all(v == ["stopped"] for v in by_key.values())


def test_L37_an_attempt_that_ended_on_its_own_before_the_stop_is_recorded_with_its_own_verdict(tmp_path):
    clock = FakeClock()
    # The first range's attempt is over the moment it starts: no pass has read it when the stop lands.
    backend = SupervisedBackend(clock, lambda spec: Script(0 if spec.range_key == KEYS[0] else 100))
    d, _, records = make(tmp_path, parallelism=3, backend=backend, clock=clock)
    submit = backend.submit
    backend.submit = lambda spec: (submit(spec), len(backend.submitted) == 3 and d.stop("stopped by the operator"))
    result = d.run()
    assert result.condemned == {} and result.done == [KEYS[0]]
    _, by_key = chains(records)
    assert by_key == {KEYS[0]: ["ok"], KEYS[1]: ["stopped"], KEYS[2]: ["stopped"]}


@dataclass
class FinishingBackend(StoppingBackend):
    """Its shutdown deletes the live attempts but the first, which ends on its own meanwhile (ok)."""

    def shutdown(self, grace: float) -> list[str]:
        self.shutdowns += 1
        live = sorted((s for s in self.observe() if s.live), key=lambda s: s.attempt_id)
        self.attempts[live[0].attempt_id].script = Script(0)
        for s in live[1:]:
            del self.attempts[s.attempt_id]
        return []


def test_L10_after_a_stop_the_live_gauges_equal_the_records(tmp_path):
    """The metrics read their last snapshot after the run returns (mission/metrics.py flushes at the end):
    an attempt the stop recorded, or one that ended on its own during the stop, is no longer live there."""
    clock = FakeClock()
    backend = FinishingBackend(clock, lambda spec: Script(100))
    d, _, records = make(tmp_path, parallelism=3, backend=backend, clock=clock)
    takes = []
    d.on_pass = takes.append
    backend.on_submit = lambda n: n == 3 and d.stop("stopped by the operator (SIGTERM)")
    result = d.run()
    assert result.stopped and backend.shutdowns == 1
    _, by_key = chains(records)
    assert sorted(by_key.values()) == [["ok"], ["stopped"], ["stopped"]]
    end = takes[-1]()  # as the metrics take it, once the run is over
    assert end.live == {"pending": 0, "running": 0}
    assert end.ranges["done"] == 1 and end.ranges["pending"] == end.ranges["running"] == 0
    assert end.attempts == {"ok": 1, "stopped": 2}
