"""The local kubelet: runs one attempt's worker and writes its verdict.

Run as `python -m catchup_assets.backends.local.supervisor ATTEMPT_DIR`, in its
own session, so it outlives the dispatcher that started it. Everything it
knows goes to files in ATTEMPT_DIR (the registry, L10); `status.json` is
written last, atomically, and its presence is what "finished" means (L32, L33).
Its files are `state.py`'s; what it measures of its worker, `sampling.py`'s.

Kept free of heavy imports: a supervisor per attempt, many at once.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import psutil

from catchup_assets.backends.local.sampling import disk_usage, sample_tree
from catchup_assets.backends.local.state import PEAK_KEYS, flush_peaks, read_json, take_gate, write_json_atomic
from catchup_assets.core.classify.outcomes import STOP_CONDITION
from catchup_assets.core.errors import StateError

if TYPE_CHECKING:
    from catchup_assets.sim.disruption import Emulator

log = logging.getLogger("catchup_assets.backends.local.supervisor")

PEAKS_FLUSH_SECONDS = 2.0
# A spec may force the stand-in's spot reclaim, e.g. for a demo of one range.
DISRUPT_ENV = "CATCHUP_DISRUPT_AFTER_SECONDS"


def _emulator(spec: dict, launch: dict, log_path: Path) -> Emulator | None:
    """The stand-in for a cluster's reclaims and disk evictions, only when the attempt asks for it."""
    forced = (spec.get("env") or {}).get(DISRUPT_ENV)
    if launch.get("disruption") is None and forced is None:
        return None
    from catchup_assets.sim.disruption import Emulator  # opt-in: an ordinary run never imports the sim

    return Emulator(launch.get("disruption") or {}, forced, log_path)


def exit_code_of(returncode: int) -> int:
    # As a container runtime reports it: killed by signal N -> 128 + N.
    return 128 - returncode if returncode < 0 else returncode


def pid_alive(pid: int, create_time: float | None) -> bool:
    """True if pid is running and is the same process (pid reuse, zombies)."""
    try:
        p = psutil.Process(pid)
        # btime in /proc/stat jitters by up to a second between readers.
        if create_time is not None and abs(p.create_time() - create_time) > 2.0:
            return False
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def worker_env(spec: dict, launch: dict) -> dict[str, str]:
    # Structured values only: nothing here is ever pasted into a shell string (L17).
    env = dict(os.environ)
    env.update(launch.get("env") or {})
    env.update(
        RANGE_KEY=spec["range_key"],
        CATCHUP_TARGET=str(spec["target_ledger"]),
        CATCHUP_COUNT=str(spec["ledger_count"]),
        CATCHUP_MISSION=spec["mission"],
        CATCHUP_ATTEMPT=str(spec["attempt"]),
        DATA_DIR=launch["data_dir"],
    )
    env.update(spec.get("env") or {})
    return {str(k): str(v) for k, v in env.items()}


class Supervisor:
    def __init__(self, attempt_dir: Path) -> None:
        self.dir = attempt_dir
        self.stop_signal: int | None = None
        self.peaks: dict = dict.fromkeys(PEAK_KEYS)
        self.status: dict = {
            "exit_code": None,
            "termination_reason": None,
            "pod_reason": None,
            "conditions": [],
            "message": "",
            "started_at": None,
            "finished_at": None,
            "node": socket.gethostname(),
        }
        self.messages: list[str] = []

    def _on_signal(self, signum: int, _frame: Any) -> None:
        self.stop_signal = signum

    def run(self) -> int:
        for s in (signal.SIGTERM, signal.SIGINT):
            signal.signal(s, self._on_signal)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        me = psutil.Process()
        if not take_gate(self.dir, str(me.pid)):
            return 0  # fenced before it started (state.py): its verdict is written, it never runs
        # Its own record (with "node"), written once the handlers are in place: until then a stop
        # would kill it without a verdict, so backend.shutdown waits for this one to signal it.
        write_json_atomic(
            self.dir / "supervisor.json", {"pid": me.pid, "create_time": me.create_time(), "node": self.status["node"]}
        )
        if (self.dir / "status.json").exists():
            return 0  # already judged (e.g. declared never-started): do not run twice
        proc = None
        try:
            spec = read_json(self.dir / "spec.json")
            launch = read_json(self.dir / "launch.json")
            if not spec or not launch:
                raise StateError("spec.json or launch.json missing")
            proc = self._start(spec, launch)
            if proc is not None:
                self._watch(proc, spec, launch)
        except Exception as e:  # the verdict must still be written (L32)
            log.exception("supervisor failed")
            self.messages.append(f"supervisor error: {type(e).__name__}: {e}")
            if proc is not None:
                _killpg(proc.pid, signal.SIGKILL)
        self._finish()
        return 0

    def _start(self, spec: dict, launch: dict) -> subprocess.Popen | None:
        data_dir = launch["data_dir"]
        os.makedirs(data_dir, exist_ok=True)
        if self.stop_signal is not None:
            self.messages.append(f"stopped by the operator: signal {self.stop_signal} before the worker started")
            self.status["conditions"].append(STOP_CONDITION)
            return None
        with open(self.dir / "worker.log", "ab") as out:
            try:
                proc = subprocess.Popen(
                    list(launch["command"]),
                    cwd=data_dir,
                    env=worker_env(spec, launch),
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    process_group=0,
                )
            except OSError as e:
                self.status.update(
                    exit_code=127 if isinstance(e, FileNotFoundError) else 126, termination_reason="StartError"
                )
                self.messages.append(f"worker did not start: {e}")
                return None
        self.status["started_at"] = time.time()
        try:
            ct = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            ct = None
        write_json_atomic(
            self.dir / "worker.json", {"pid": proc.pid, "create_time": ct, "started_at": self.status["started_at"]}
        )
        return proc

    def _watch(self, proc: subprocess.Popen, spec: dict, launch: dict) -> None:
        exited = threading.Event()

        def wait() -> None:
            proc.wait()
            self.status["finished_at"] = time.time()  # the worker's own end (L23)
            exited.set()

        threading.Thread(target=wait, daemon=True).start()
        interval = float(launch.get("sample_interval", 0.2))
        grace = float(launch.get("terminate_grace", 10.0))
        limit = spec.get("memory_limit_bytes")
        t0 = time.monotonic()
        deadline = spec.get("deadline_seconds")
        emulator = _emulator(spec, launch, self.dir / "worker.log")
        kill_at: float | None = None
        oom = False
        next_flush = next_walk = 0.0
        while True:
            now = time.monotonic()
            anon, ws = sample_tree(proc.pid)
            if now >= next_walk:
                w0 = time.monotonic()
                used = disk_usage(launch["data_dir"])
                self._peak("ephemeral_bytes", used)
                if emulator is not None:
                    emulator.walked(used)
                # Rarely for a huge directory: the walk must not dominate the node.
                next_walk = now + max(1.0, 20 * (time.monotonic() - w0))
            self._peak("anon_bytes", anon)
            self._peak("working_set_bytes", ws)
            if limit and anon > limit and not oom and not exited.is_set():
                oom = True
                _killpg(proc.pid, signal.SIGKILL)
                self.messages.append(f"memory limit {limit} exceeded: anon {anon} bytes")
            elif kill_at is None:
                why, wait = None, grace
                if self.stop_signal is not None:
                    # Only a stop reaches a supervisor, in a session of its own: the dispatcher's
                    # shutdown or an operator's kill. A dispatcher that dies sends nothing.
                    why = f"stopped by the operator: supervisor received signal {self.stop_signal}, worker terminated"
                    self.status["conditions"].append(STOP_CONDITION)
                elif deadline and now - t0 >= deadline:
                    why = f"deadline {deadline} s exceeded"
                    self.status["pod_reason"] = "DeadlineExceeded"
                elif emulator is not None and (hit := emulator.due(now - t0, grace)) is not None:
                    # What a cluster does uninvited: a spot reclaim, a disk eviction (sim/disruption.py).
                    why, wait = hit.why, hit.grace
                    self.status["pod_reason"] = hit.pod_reason
                    self.status["conditions"] += list(hit.conditions)
                    self.messages += hit.before
                if why:
                    self.messages.append(why)
                    _killpg(proc.pid, signal.SIGTERM)
                    kill_at = now + wait
            elif now >= kill_at and not exited.is_set():
                _killpg(proc.pid, signal.SIGKILL)
                self.messages.append(f"SIGKILL after {grace} s grace")
                kill_at = float("inf")
            if now >= next_flush:
                self.peaks = flush_peaks(self.dir / "peaks.json", self.peaks)
                next_flush = now + PEAKS_FLUSH_SECONDS
            if exited.wait(interval):
                break
        # The container is gone when its main process is: so are its orphans.
        _killpg(proc.pid, signal.SIGKILL)
        rc = exit_code_of(proc.returncode)
        if oom:
            self.status.update(exit_code=137, termination_reason="OOMKilled")
        else:
            self.status.update(exit_code=rc, termination_reason="Completed" if rc == 0 else "Error")
        self._peak("ephemeral_bytes", disk_usage(launch["data_dir"]))

    def _peak(self, key: str, value: int) -> None:
        cur = self.peaks.get(key)
        self.peaks[key] = value if cur is None else max(cur, value)

    def _finish(self) -> None:
        try:
            self.peaks = flush_peaks(self.dir / "peaks.json", self.peaks)
        except OSError as e:
            log.warning("peaks flush failed: %s", e)
        self.status["message"] = "; ".join(self.messages)
        self.status["peaks"] = self.peaks
        write_json_atomic(self.dir / "status.json", self.status)  # last (L32)


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m catchup_assets.backends.local.supervisor ATTEMPT_DIR", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    return Supervisor(Path(argv[0])).run()


if __name__ == "__main__":
    sys.exit(main())
