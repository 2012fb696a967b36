"""An operator's stop and cleanup on the real control plane (issue 34 item 4): a SIGTERM to the dispatching
process (L37), and `catchup-assets cleanup` after a mission abandoned mid-way, read back from what the real
API server holds once its garbage collector and the virtual kubelet have done their part.

The kubesim tier pins the same: tests/backends/test_k8s_stop.py and tests/backends/test_k8s_cleanup.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from dataclasses import replace

import pytest

from catchup_assets.backends.kubernetes.identity import MissionIdentity
from catchup_assets.core.classify.outcomes import decide
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.range_book import past_attempts
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.units import GiB
from catchup_assets.mission.cleanup import cleanup
from catchup_assets.mission.cleanup_settle import settled_plan
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.mission.saved import mission_nonce, save_mission
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import SETTINGS, A, B, C, D, chain, flat, mission
from kit.real_plane import ScaledClock, held, real_backend, runner_access, settles, virtual_nodes
from kubesim.kube_script import Script

pytestmark = pytest.mark.k8s


class SignalAt(ScaledClock):
    """The mission's clock, and a SIGTERM to this very process once mission time passes `at`."""

    def __init__(self, at: float):
        super().__init__()
        self.at, self.sent = self() + at, False

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if not self.sent and self() >= self.at:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)


def steady(job: dict) -> Script:
    return Script(duration=300, memory=flat(1 * GiB, 2 * GiB))


def test_L37_sigterm_on_the_real_plane_deletes_the_jobs_keeps_the_volumes_and_the_next_run_completes(
    control_plane, tmp_path
):
    ns = "ctl-stop"
    control_plane.create_namespace(ns)
    settings = replace(SETTINGS, namespace=ns)
    clock = SignalAt(at=100)  # mission seconds: 5 s of the wall, both attempts running
    keys = [B, D]
    cfg = mission(tmp_path, parallelism=2)
    with virtual_nodes(control_plane, clock, scripts=steady) as remote, control_plane.api_client() as api:
        access = runner_access(control_plane, remote, tmp_path, ns)
        before = signal.getsignal(signal.SIGTERM)
        result = run_mission(prepare(cfg, keys), own_backend(api, settings, access, tmp_path, clock, cfg), clock=clock)
        assert signal.getsignal(signal.SIGTERM) is before  # the caller's handler is back
        assert result.stopped == "stopped by the operator (SIGTERM)"
        assert result.condemned == {} and result.done == []
        assert held(api, ns)["jobs"] == 0  # deleted by the stop itself, before the run returned
        # The real garbage collector deletes their pods (propagationPolicy Background); the virtual kubelet
        # stops the containers and confirms. The volumes stay for the resume.
        assert settles(lambda: held(api, ns), {"jobs": 0, "pods": 0, "pvcs": 2}) == {"jobs": 0, "pods": 0, "pvcs": 2}
        records = RecordStore(Store(cfg.storage_root), "m1")
        recs, done = records.load()
        assert done == set(recs) == {(B, 1), (D, 1)}  # nothing dispatched after the signal
        for key in keys:
            (rec,) = chain(recs, key)
            assert rec.outcome == "stopped" and "SIGTERM" in rec.reason, rec
            assert rec.started_at is not None and rec.memory_limit_bytes  # what is known of it is kept
            decision = decide(past_attempts({1: rec}, {1}), cfg.retry)
            assert decision.action == "retry" and not any(decision.counts.values())  # no budget spent

        b = own_backend(api, settings, access, tmp_path / "next", clock, cfg)
        again = run_mission(prepare(cfg, keys), b, clock=clock)
        assert again.stopped is None and sorted(again.done) == sorted(keys) and again.condemned == {}
        recs, done = records.load()
        assert done == set(recs)
        assert {k: [r.outcome for r in chain(recs, k)] for k in keys} == {B: ["stopped", "ok"], D: ["stopped", "ok"]}
        assert held(api, ns) == {"jobs": 0, "pods": 0, "pvcs": 0}  # each completed range freed its volume (L3)
        assert remote.errors == 0


def abandoned(job: dict) -> Script:
    labels = job["metadata"]["labels"]
    key, attempt = labels["catchup.stellar.org/range-key"], int(labels["catchup.stellar.org/attempt"])
    seconds = 4000 if (key, attempt) == (C, 1) else {D: 60}.get(key, 300)  # C outlives the abandoned run
    return Script(duration=seconds, memory=flat(1 * GiB, 2 * GiB))


def own_backend(api, settings, access, tmp_path, clock, cfg):
    """A backend signing with the nonce the mission's mission.json keeps, as the deployment's signs (issue 45
    item 1): the CLI's cleanup and every later dispatcher read the identity from there and leave any other Job
    alone, so a backend with another nonce would neither see nor stop these attempts."""
    save_mission(Store(cfg.storage_root), cfg)  # idempotent: the nonce made once is kept
    identity = MissionIdentity(mission_nonce(Store(cfg.storage_root), cfg.mission))
    return real_backend(api, settings, access, tmp_path, clock, identity=identity)


def abandon_mid_mission(api, settings, access, tmp_path, clock, passes: int = 10):
    """A dispatcher that ran `passes` passes and then died: D completed (its volume freed, L3), A, B and C in
    flight, their Jobs and volumes left on the real API server."""
    cfg = mission(tmp_path)
    save_mission(Store(cfg.storage_root), cfg)
    d = Dispatcher(
        DispatchConfig(cfg, prepare(cfg).ordered),
        own_backend(api, settings, access, tmp_path, clock, cfg),
        RecordStore(Store(cfg.storage_root), "m1"),
        clock=clock,
    )
    for _ in range(passes):
        d.pass_once()
        clock.sleep(10)
    assert settles(lambda: held(api, settings.namespace), {"jobs": 3, "pods": 3, "pvcs": 3}) == {
        "jobs": 3,
        "pods": 3,
        "pvcs": 3,
    }
    return cfg


def test_cleanup_from_the_cli_refuses_a_live_run_then_forced_leaves_nothing_on_the_real_plane(control_plane, tmp_path):
    ns = "ctl-cleanup-live"
    control_plane.create_namespace(ns)
    settings = replace(SETTINGS, namespace=ns)
    clock = ScaledClock()
    with virtual_nodes(control_plane, clock, scripts=abandoned) as remote, control_plane.api_client() as api:
        access = runner_access(control_plane, remote, tmp_path, ns)
        cfg = abandon_mid_mission(api, settings, access, tmp_path, clock)
        deployment = {  # the deployment's catchup.json, as an operator's shell has it
            "backend": "kubernetes",
            "kubernetes": {
                "namespace": ns,
                "image": settings.image,
                "kubeconfig": str(control_plane.kubeconfig),
                "kubelet_ca_file": access.ca_file,
                "kubelet_token_file": access.token_file,
            },
        }
        (tmp_path / "catchup.json").write_text(json.dumps(deployment))

        def cli(*extra: str) -> subprocess.CompletedProcess:
            args = ["--root", cfg.storage_root, "--mission", "m1", "--settings", str(tmp_path / "catchup.json")]
            command = [sys.executable, "-m", "catchup_assets.cli.main", "cleanup", *args, *extra]
            return subprocess.run(command, capture_output=True, text=True, timeout=120)

        refused = cli()
        assert refused.returncode == 2, refused.stderr
        assert "mission m1: 3 attempts (3 live) and 3 volumes holding 300.0 GiB left" in refused.stdout
        assert "catchup-assets: error: force: a run of mission m1 is live" in refused.stderr
        assert "Traceback" not in refused.stderr
        assert held(api, ns) == {"jobs": 3, "pods": 3, "pvcs": 3}  # refused: nothing deleted

        forced = cli("--all", "--force")
        assert forced.returncode == 0, forced.stderr
        # The garbage collector ends the Jobs' pods on its own; a volume a pod mounts is held by the real
        # kubernetes.io/pvc-protection finalizer until that pod is gone. The cleanup waits for both, saying so,
        # and counts a volume freed once it is gone (before, on this tier: "0 volumes, freeing 0.0 GiB"). The
        # stop deleted the Jobs first, so how many pods are still ending when the volumes go is the GC's timing.
        waits = re.findall(r"waiting for (\d) deleted objects to go \((\d) volumes, each released once", forced.stdout)
        assert all(n == v and 1 <= int(n) <= 3 for n, v in waits), forced.stdout
        # Forced, the live attempts are stopped as a stopped run stops them (their Jobs deleted, L37) and
        # recorded before anything else goes (issue 36 item 9): what is left to delete is their volumes.
        assert "  stopped:  the live attempts (forced): 3 attempts recorded by the stop, then released" in forced.stdout
        assert "deleted 0 attempts and 3 volumes, freeing 300.0 GiB (forced past a live run)" in forced.stdout
        assert {r.outcome for r in RecordStore(Store(cfg.storage_root), "m1").load()[0].values()} == {"ok", "stopped"}
        assert "still there" not in forced.stdout
        assert held(api, ns) == {"jobs": 0, "pods": 0, "pvcs": 0}
        assert remote.errors == 0


def test_cleanup_after_a_terminated_run_keeps_resumable_volumes_and_a_later_run_completes_on_the_real_plane(
    control_plane, tmp_path
):
    ns = "ctl-cleanup-kept"
    control_plane.create_namespace(ns)
    settings = replace(SETTINGS, namespace=ns)
    clock = ScaledClock()
    with virtual_nodes(control_plane, clock, scripts=abandoned) as remote, control_plane.api_client() as api:
        access = runner_access(control_plane, remote, tmp_path, ns)
        cfg = abandon_mid_mission(api, settings, access, tmp_path, clock)
        clock.sleep(300)  # nobody dispatches: A and B finish unrecorded, C still runs
        b = own_backend(api, settings, access, tmp_path / "cleanup", clock, cfg)
        b.shutdown(15)  # the terminated run's grace, as a Dagster termination does (L37): C's Job goes
        assert settles(lambda: held(api, ns)["jobs"], 2) == 2
        clock.sleep(200)  # past the claims' grace
        records = RecordStore(Store(cfg.storage_root), "m1")
        # A and B finished unrecorded: read and recorded first, as a dispatcher would (issue 36 item 9), so
        # they are completed and their volumes go; C's Job went with the stop, its volume resumes.
        plan, settled = settled_plan(cfg.storage_root, "m1", b, now=clock.time())
        assert plan.live == () and sorted(settled.recorded) == sorted([f"{A} a001 ok", f"{B} a001 ok"])
        assert [o.range_key for o in plan.keep] == [C]
        assert (plan.freed_bytes, plan.kept_bytes) == (200 * GiB, 100 * GiB)
        cleanup(plan, b)
        # Every Job gone with its pods; the volume of C kept for a later run.
        assert settles(lambda: held(api, ns), {"jobs": 0, "pods": 0, "pvcs": 1}) == {"jobs": 0, "pods": 0, "pvcs": 1}

        again = own_backend(api, settings, access, tmp_path / "again", clock, cfg)
        result = run_mission(prepare(cfg), again, clock=clock)
        assert result.condemned == {} and sorted(result.done) == sorted([A, B, C, D])
        recs, done = records.load()
        assert {r.outcome for k, r in recs.items() if k in done} == {"ok"}  # no failure charged
        assert settles(lambda: held(api, ns), {"jobs": 0, "pods": 0, "pvcs": 0}) == {"jobs": 0, "pods": 0, "pvcs": 0}
        assert remote.errors == 0
