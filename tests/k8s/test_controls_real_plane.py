"""The operator's controls on the real control plane (issue 34 item 4): parallelism raised and lowered, pause,
resume and drain, each obeyed within two passes, as counted from the Jobs the real API server holds after each
pass. The kubesim tier pins the same in tests/core/test_dispatch_control.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import pytest
from kubernetes.client import BatchV1Api

from catchup_assets.backends.kubernetes.names import mission_selector
from catchup_assets.core.dispatch.mission_control import MissionControl
from catchup_assets.core.dispatch.obey import DRAINED
from catchup_assets.core.dispatch.results import RangeStatus
from catchup_assets.core.plan.ranges import MissionSpan
from catchup_assets.core.units import GiB
from catchup_assets.mission.plan import prepare
from catchup_assets.mission.run import run_mission
from catchup_assets.store.control_record import ControlStore
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store
from kit.k8s_backend import SETTINGS, flat, mission
from kit.real_plane import ScaledClock, held, real_backend, runner_access, settles, virtual_nodes
from kubesim.kube_script import Script

pytestmark = pytest.mark.k8s

SPAN = MissionSpan(59_200_001, 59_968_000, ledgers_per_range=64_000, overlap=320)  # 12 ranges
CAP = 8  # the deployment's max_parallelism


def steady(job: dict) -> Script:
    return Script(duration=200, memory=flat(1 * GiB, 2 * GiB))  # 20 passes of 10 s


@dataclass
class Operator:
    """After each pass (the dispatcher's status, said every pass): what the real API server holds of the
    mission's Jobs, and the control changes due at that pass, written as `catchup-assets control` writes them."""

    api: object
    ns: str
    control: ControlStore
    clock: ScaledClock
    plan: dict[int, tuple[str, int | None]]  # pass -> (action, value)
    active: list[set[str]] = field(default_factory=list)  # per pass: the Jobs not finished
    first_seen: dict[str, int] = field(default_factory=dict)  # Job -> the pass after which it was first held

    def __call__(self, status) -> None:
        n = len(self.active)  # this pass's index
        raw = BatchV1Api(self.api).list_namespaced_job(
            self.ns, label_selector=mission_selector("m1"), _preload_content=False
        )
        jobs = json.loads(raw.data)["items"]
        for job in jobs:
            self.first_seen.setdefault(job["metadata"]["name"], n)
        active = {j["metadata"]["name"] for j in jobs if not finished(j)}
        self.active.append(active)
        if n in self.plan:
            action, value = self.plan.pop(n)
            current = self.control.read() or MissionControl()
            self.control.write(current.apply(action, value, who="ops", at=self.clock(), max_parallelism=CAP))

    def made_after(self, after: int, before: int) -> set[str]:
        """The Jobs first held after pass `after` and up to pass `before`."""
        return {name for name, n in self.first_seen.items() if after < n <= before}


def finished(job: dict) -> bool:
    conditions = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)


def test_parallelism_pause_resume_and_drain_are_obeyed_within_two_passes_on_the_real_plane(control_plane, tmp_path):
    ns = "ctl-controls"
    control_plane.create_namespace(ns)
    settings = replace(SETTINGS, namespace=ns)
    clock = ScaledClock()
    cfg = mission(tmp_path, span=SPAN, parallelism=2, status_every=1)
    store = Store(cfg.storage_root)
    # After pass index 3, raise to 4; after 6, pause; once nothing runs (R), resume; R+3, lower to 1; R+5, drain.
    plan = {3: ("parallelism", 4), 6: ("pause", None)}
    resumed: list[int] = []
    with virtual_nodes(control_plane, clock, scripts=steady) as remote, control_plane.api_client() as api:
        access = runner_access(control_plane, remote, tmp_path, ns)
        op = Operator(api, ns, ControlStore(store, "m1"), clock, plan)

        def operator(status) -> None:
            n = len(op.active)
            if n > 8 and not resumed and not op.active[-1]:  # the four the pause let finish have finished
                resumed.append(n)
                plan.update({n: ("resume", None), n + 3: ("parallelism", 1), n + 5: ("drain", None)})
            op(status)

        result = run_mission(
            prepare(cfg), real_backend(api, settings, access, tmp_path, clock), clock=clock, on_status=operator
        )

        counts = [len(a) for a in op.active]
        assert counts[0] <= 2 and counts[1:4] == [2, 2, 2], counts  # the plan's parallelism
        assert counts[5] == 4, counts  # raised after pass index 3: read by the next pass, filled within two
        assert max(counts) == 4, counts
        # Paused after index 6: nothing made after index 8; the four in flight run to their end.
        (r,) = resumed
        assert op.made_after(8, r) == set() and set().union(*op.active[4:r]) == op.active[5]
        # Resumed: filled to 4 again within two passes, four new Jobs.
        assert counts[r + 2] == 4 and len(op.made_after(r, r + 2)) == 4, counts
        # Lowered to 1 while four run, then drained: nothing new after index r + 7, nothing stopped.
        assert op.made_after(r + 7, len(counts)) == set()
        assert result.drained and result.condemned == {}
        left = {k for k, res in result.results.items() if res.status is RangeStatus.NOT_RUN}
        assert len(left) == 4 and {result.results[k].reason for k in left} == {DRAINED}
        records, done = RecordStore(store, "m1").load()
        # Every attempt ran to its end: lowering the parallelism and draining stopped none (no `stopped`).
        assert {r.outcome for r in records.values()} == {"ok"} and done == set(records) and len(records) == 8
        assert {k for k, _ in records}.isdisjoint(left)  # the drained ranges never started
        assert settles(lambda: held(api, ns), {"jobs": 0, "pods": 0, "pvcs": 0}) == {"jobs": 0, "pods": 0, "pvcs": 0}

        # A later run, resumed at 4, completes the rest.
        for action, value in (("resume", None), ("parallelism", 4)):
            current = op.control.read()
            op.control.write(current.apply(action, value, who="ops", at=clock(), max_parallelism=CAP))
        b = real_backend(api, settings, access, tmp_path / "later", clock)
        later = run_mission(prepare(cfg), b, clock=clock)
        assert not later.drained and len(later.done) == 12 and later.condemned == {}
        assert held(api, ns)["jobs"] == 0
        assert remote.errors == 0
