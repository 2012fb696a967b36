"""The workload model's ranges as the virtual kubelet runs them: one Script per pod, from a range's cost
(catchup_assets.sim.workload) and one mission's draw, the same on kubesim and on the real control plane."""

from __future__ import annotations

from dataclasses import dataclass

from catchup_assets.core.size.sizing import Tiers
from catchup_assets.core.units import GiB
from catchup_assets.core.values.ledger_range import parse_key
from catchup_assets.sim.core_log import tx_apply_report
from catchup_assets.sim.workload import Workload
from kit.k8s_backend import SETTINGS
from kubesim.kube_script import Script, Usage

DISK = 2 * GiB  # what the worker writes beside its volume; the range's data is on its PVC


@dataclass(frozen=True)
class WorkloadPods:
    """`__call__(pod)`: the range's clean run, `time_scale` times faster, in whole seconds (the API's
    startedAt and finishedAt are whole seconds: a whole duration is recorded exactly on any clock).
    A range the draw reclaims loses its node partway through its first attempt; the next attempt
    resumes on the same volume and runs the rest. A range above its limit is OOMKilled by the kubelet."""

    workload: Workload
    mission_seed: int
    time_scale: float = 500.0
    shortest: int = 2  # seconds: long enough for the kubelet's stats to see it

    def seconds(self, key: str) -> int:
        draw = self.workload.draw(key, self.mission_seed)
        return max(self.shortest, round(self.workload.cost_of(key).seconds * draw.seconds_factor / self.time_scale))

    def reclaimed_at(self, key: str) -> int | None:
        """Seconds into its first attempt at which the range's node goes (None: it is not reclaimed)."""
        at = self.workload.draw(key, self.mission_seed).disrupt_at
        return None if at is None else max(1, min(self.seconds(key) - 1, round(at * self.seconds(key))))

    def __call__(self, pod: dict) -> Script:
        labels = pod["metadata"]["labels"]
        key, attempt = labels["catchup.stellar.org/range-key"], int(labels["catchup.stellar.org/attempt"])
        cost = self.workload.cost_of(key)
        total, reclaim = self.seconds(key), self.reclaimed_at(key)
        usage = Usage(cost.peak_anon_bytes, cost.peak_working_set_bytes, DISK)
        memory = [(0.0, usage), (1e9, usage)]
        declined = "RESUME DECLINED: no range marker in the data dir (never started here)"
        if reclaim is not None and attempt == 1:
            # The reclaim takes the node before the exit report: what the leg replayed is in no report.
            return Script(
                duration=reclaim,
                disrupt="TerminationByKubelet",
                disrupt_mode="node_gone",
                memory=memory,
                lines=[declined],
            )
        if reclaim is not None:
            r = parse_key(key)
            lcl = r.first + (r.last - r.first) * reclaim // total
            # The resumed leg's report counts what it replayed: the ledgers after the reclaimed leg's LCL.
            report = tx_apply_report(cost.tx_apply_count * (r.last - lcl) // (r.last - r.first), 1.47073e06)
            resumed = [f"RESUME: range {key} from LCL {lcl} toward target {r.last}", *report]
            return Script(duration=total - reclaim, memory=memory, lines=resumed)
        return Script(
            duration=total, memory=memory, lines=[declined, *tx_apply_report(cost.tx_apply_count, 1.47073e06)]
        )


def one_pod_nodes(counts: dict[str, int]):
    """`counts[tier]` nodes of each tier that take one pod each (`pods: 1`): a reclaim takes one attempt
    alone, whichever scheduler places them, so kubesim's and the real one's missions can be compared."""

    def add(kubelet) -> None:
        for tier in Tiers().all():
            for n in range(counts.get(tier.name, 0)):
                kubelet.add_node(
                    f"{tier.name}-{n}",
                    labels={SETTINGS.tier_node_label: tier.name},
                    taints=[{"key": SETTINGS.tier_taint_key, "value": tier.name, "effect": "NoSchedule"}],
                    allocatable={"memory": str(tier.node_memory_bytes), "cpu": "64", "pods": "1"},
                )

    return add
