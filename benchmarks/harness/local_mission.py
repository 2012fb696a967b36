"""One mission through the real Dispatcher and LocalBackend, with real or stand-in supervisors.

Real: every attempt is a `local.supervisor` process running the real worker
entrypoint and the simulated stellar-core, as tests/mission/test_mission_local.py
runs them: two Python processes, ~19 MiB unique memory per attempt, so a
2-core, 24 GiB machine holds a few hundred, not 2000.

Stand-in: LocalBackend's injectable `python` is a POSIX sh script in place of
the supervisor. Everything on the dispatcher's side is the production code
(submit spawns it, observe reads the registry, collect archives and parses
the log, release deletes it); the stand-in keeps the files a running
supervisor keeps, in its format (worker.json, peaks.json, worker.log, then
status.json last and atomically), and holds a live process for the
attempt's duration. It costs ~1 MiB per attempt, so 2000 fit.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks.harness.meter import DispatcherMeter, MachineLoad
from benchmarks.harness.sim_cluster import mission_config, mission_ranges
from catchup_assets.backends.local.backend import LocalBackend
from catchup_assets.core.dispatch.dispatch_config import DispatchConfig
from catchup_assets.core.dispatch.reconciler import Dispatcher
from catchup_assets.core.dispatch.results import MissionResult
from catchup_assets.sim.core_log import tx_apply_report
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

# Invoked as `<script> -m catchup_assets.backends.local.supervisor ATTEMPT_DIR`, in the attempt
# directory. The duration comes from the attempt's name, so a rerun runs the same mission.
STANDIN = r"""#!/bin/sh
dir=$3
cd "$dir" || exit 1
atomic() { printf '%s\n' "$2" > ".$1.$$.tmp" && mv -f ".$1.$$.tmp" "$1"; }
sum=$(printf '%s' "${dir##*/}" | cksum)
sum=${sum%% *}
secs=$((SHORTEST + sum % (LONGEST - SHORTEST + 1)))
peaks='{"anon_bytes": 2147483648, "working_set_bytes": 3221225472, "ephemeral_bytes": 1073741824}'
code=0
trap 'kill "$child" 2>/dev/null; code=143' TERM INT
sleep "$secs" &
child=$!
started=$(date +%s.%N)
atomic worker.json "{\"pid\": $child, \"create_time\": null, \"started_at\": $started}"
atomic peaks.json "$peaks"
{
  echo "WORKER: range ${dir##*/} (stand-in, $secs s)"
  echo "RESUME DECLINED: no range marker in the data dir (never started here)"
  cat "TX_REPORT_FILE"
} > worker.log
wait "$child"
wait "$child" 2>/dev/null
finished=$(date +%s.%N)
reason=Completed
[ "$code" = 0 ] || reason=Error
verdict="\"exit_code\": $code, \"termination_reason\": \"$reason\", \"pod_reason\": null, \"conditions\": []"
verdict="$verdict, \"message\": \"\", \"started_at\": $started, \"finished_at\": $finished"
atomic status.json "{$verdict, \"node\": \"$(uname -n)\", \"peaks\": $peaks}"
"""


@dataclass(frozen=True)
class LocalMission:
    parallelism: int
    ranges_per_slot: float = 2.0
    supervisor: str = "real"  # "real" | "standin"
    shortest: int = 40  # stand-in durations, wall seconds
    longest: int = 120
    sim_speed: float = 16.0  # real: the simulated core's ranges near genesis then take ~35-55 s
    poll_seconds: float = 1.0  # DispatchConfig's default
    sample_interval: float = 0.2  # LocalBackend's default
    profile_steady_pass: bool = False
    trace_steady_pass: bool = False

    @property
    def ranges(self) -> int:
        return round(self.ranges_per_slot * self.parallelism)


@dataclass
class LocalMissionRun:
    mission: LocalMission
    result: MissionResult
    meter: DispatcherMeter
    wall: float
    setup_rss: int
    run_cpu: float  # process CPU seconds of the whole run; the supervisors are other processes
    left_alive: list[str]
    other_cores: float  # what the rest of the machine used meanwhile (the supervisors count as ours)

    @property
    def attempts(self) -> int:
        return sum(r.attempts for r in self.result.results.values())

    @property
    def passes(self) -> int:
        return self.result.passes


def _backend(m: LocalMission, work: Path) -> LocalBackend:
    if m.supervisor == "standin":
        script = work / "standin-supervisor.sh"
        report = work / "tx-apply-report.log"  # stellar-core's exit report, as the sim core prints it
        report.write_text("\n".join(tx_apply_report(1000, 1.47073e06, when="2024-01-01T00:00:00.000")) + "\n")
        script.write_text(
            STANDIN.replace("SHORTEST", str(m.shortest))
            .replace("LONGEST", str(m.longest))
            .replace("TX_REPORT_FILE", str(report))
        )
        script.chmod(0o755)
        return LocalBackend(work / "work", "m1", python=str(script), sample_interval=m.sample_interval)
    if m.supervisor != "real":
        raise ValueError(f"supervisor must be 'real' or 'standin', got {m.supervisor!r}")
    env = {"SIM_SPEED": str(m.sim_speed), "SIM_MEMORY_SCALE": "0.001", "SIM_DISK_SCALE": "0.0001"}
    return LocalBackend(work / "work", "m1", env=env, sample_interval=m.sample_interval)


def run_local_mission(m: LocalMission, work_dir: str | Path | None = None) -> LocalMissionRun:
    with tempfile.TemporaryDirectory(prefix="local-mission-", dir=work_dir) as tmp:
        work = Path(tmp)
        backend = _backend(m, work)
        mission = mission_config(
            m.ranges, work / "storage", parallelism=m.parallelism, poll_seconds=m.poll_seconds, status_every=10**9
        )
        config = DispatchConfig(mission, mission_ranges(m.ranges))
        dispatcher = Dispatcher(config, backend, RecordStore(Store(work / "storage"), "m1"))
        meter = DispatcherMeter(
            dispatcher, backend, profile_steady_pass=m.profile_steady_pass, trace_steady_pass=m.trace_steady_pass
        )
        setup_rss = meter.rss()
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            with MachineLoad() as load:
                result = dispatcher.run()
            wall, run_cpu = time.perf_counter() - t0, time.process_time() - c0
        finally:
            # Never leave detached supervisors behind, whatever happened.
            left = backend.shutdown(grace=30)
        return LocalMissionRun(m, result, meter, wall, setup_rss, run_cpu, left, load.other_cores)
