"""The local backend's registry: a mission's attempt directories read back as attempt states (L10).

Nothing here is a source of truth but the files: the caches keep only what
cannot change (a spec, a verdict read at a given mtime), so a new reader over
the same directory sees what the old one did. A torn or unreadable file costs
its attempt, never the pass (L12). An attempt is pending until its supervisor
has started its worker, running while that process lives, finished once `status.json`
is there; one whose supervisor died without a verdict is a lost node (Z3).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal
import time
from collections.abc import Callable
from pathlib import Path

from catchup_assets.backends.local.state import fence, gate_owner, merge_peaks, read_json
from catchup_assets.backends.local.supervisor import pid_alive
from catchup_assets.core.classify.outcomes import Observation
from catchup_assets.core.dispatch.ports import AttemptState, Peaks, Phase

# The backend's logger: what the registry warns of is the backend's pass.
log = logging.getLogger("catchup_assets.backends.local.backend")

# A dispatcher that died between creating an attempt and starting its
# supervisor leaves a directory nobody runs; after this long it is judged lost.
START_TIMEOUT = 60.0
_NAME = re.compile(r"(?P<range>.+)-a(?P<attempt>[0-9]{3,})")  # fullmatch, ASCII digits


def peaks_of(d: dict | None) -> Peaks:
    m = merge_peaks(d, None)
    return Peaks(m["anon_bytes"], m["working_set_bytes"], m["ephemeral_bytes"])


class Registry:
    """One mission's `attempts/` directory, read by the backend that owns it."""

    def __init__(
        self,
        attempts_dir: Path,
        disk_full: Callable[[], str | None],
        refusal: Callable[[str, Path], str | None] = lambda aid, d: None,
    ) -> None:
        self.attempts_dir = attempts_dir
        self.disk_full = disk_full  # why a vanished supervisor may have died, or None
        # Why a directory is not the mission's (issue 45): it is then no attempt, never read or fenced.
        self.refusal = refusal
        self._specs: dict[str, dict] = {}
        self._finished: dict[str, tuple[int, AttemptState]] = {}
        self._warned: set[str] = set()

    def forget(self, aid: str) -> None:
        for cache in (self._specs, self._finished):
            cache.pop(aid, None)

    def scan(self) -> list[AttemptState]:
        """Every attempt directory read; a torn or unreadable one costs itself only (L12)."""
        try:
            entries = list(os.scandir(self.attempts_dir))
        except FileNotFoundError:
            return []
        states = []
        for e in entries:
            if e.name.startswith(".") or not e.is_dir(follow_symlinks=False):
                if e.name.startswith(".trash-"):
                    shutil.rmtree(e.path, ignore_errors=True)  # an interrupted release
                continue
            try:
                st = self.one(e.name, Path(e.path))
            except Exception as exc:  # noqa: BLE001 - one bad attempt costs itself, not the pass (L12)
                self.warn(e.name, f"attempt {e.name} unreadable, skipped: {exc}")
                continue
            if st is not None:
                states.append(st)
        return states

    def of_range(self, range_key: str) -> list[AttemptState]:
        """The range's own attempts only: a full observe per finished range costs O(in flight)."""
        prefix = f"{range_key}-a"
        try:
            names = [
                e.name
                for e in os.scandir(self.attempts_dir)
                if e.name.startswith(prefix) and e.is_dir(follow_symlinks=False)
            ]
        except FileNotFoundError:
            return []
        states = []
        for name in names:
            try:
                st = self.one(name, self.attempts_dir / name)
            except Exception as exc:  # noqa: BLE001 - one bad attempt costs itself, not the pass (L12)
                self.warn(name, f"attempt {name} unreadable, skipped: {exc}")
                continue
            if st is not None and st.range_key == range_key:
                states.append(st)
        return states

    def warn(self, key: str, msg: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(msg)

    def json(self, aid: str, path: Path) -> dict | None:
        try:
            v = read_json(path)
        except ValueError as e:
            self.warn(f"{aid}:{path.name}", str(e))
            return None
        return v if isinstance(v, dict) else None

    def one(self, aid: str, d: Path) -> AttemptState | None:
        """The attempt in directory `d`; None if it names no attempt, is gone, or is not the mission's."""
        if aid not in self._specs and (why := self.refusal(aid, d)) is not None:
            self.warn(aid, f"attempt directory {d} is not the mission's ({why}): ignored, never read or removed")
            return None
        status_path = d / "status.json"
        try:
            mtime = status_path.stat().st_mtime_ns
        except FileNotFoundError:
            mtime = None
        if mtime is not None and aid in self._finished and self._finished[aid][0] == mtime:
            return self._finished[aid][1]
        spec = self._specs.get(aid) or self.json(aid, d / "spec.json")
        if spec is not None:
            self._specs[aid] = spec
            range_key, attempt = spec["range_key"], int(spec["attempt"])
        else:
            m = _NAME.fullmatch(aid)
            if not m:
                self.warn(aid, f"attempt directory {aid} has no spec and no attempt name")
                return None
            range_key, attempt = m["range"], int(m["attempt"])
        base = dict(
            range_key=range_key,
            attempt=attempt,
            memory_limit_bytes=(spec or {}).get("memory_limit_bytes"),
            tier=(spec or {}).get("tier"),
        )
        peaks = self.json(aid, d / "peaks.json")
        if mtime is not None:
            status = self.json(aid, status_path)
            if status is not None:
                state = AttemptState(
                    phase=Phase.FINISHED,
                    observation=Observation(
                        exit_code=status.get("exit_code"),
                        termination_reason=status.get("termination_reason"),
                        pod_reason=status.get("pod_reason"),
                        conditions=frozenset(status.get("conditions") or ()),
                        message=status.get("message") or "",
                        node_gone=bool(status.get("node_gone", False)),
                    ),
                    started_at=status.get("started_at"),
                    finished_at=status.get("finished_at"),
                    node=status.get("node"),
                    peaks=peaks_of(merge_peaks(status.get("peaks"), peaks)),
                    **base,
                )
                self._finished[aid] = (mtime, state)
                return state
        sup = self.json(aid, d / "supervisor.json")
        worker = self.json(aid, d / "worker.json") or {}
        running = dict(started_at=worker.get("started_at"), peaks=peaks_of(peaks), **base)
        if sup is not None and pid_alive(sup["pid"], sup.get("create_time")):
            # Pending until its worker started (worker.json), as a pod is until its container runs.
            phase = Phase.RUNNING if worker.get("pid") else Phase.PENDING
            return AttemptState(phase=phase, node=sup.get("node"), **running)
        if mtime is not None:  # torn verdict, nobody left to rewrite it
            return AttemptState(
                phase=Phase.FINISHED, observation=Observation(message="status.json unreadable"), **running
            )
        if sup is None:
            try:
                age = time.time() - d.stat().st_mtime
            except FileNotFoundError:
                return None
            if age < START_TIMEOUT:
                return AttemptState(phase=Phase.PENDING, **running)
            # Fenced: a supervisor that starts after this finds the gate taken and never runs.
            if fence(d, "supervisor never started"):
                return AttemptState(
                    phase=Phase.FINISHED,
                    observation=Observation(node_gone=True, message="supervisor never started"),
                    **running,
                )
            owner = gate_owner(d)
            if owner is not None and owner.isascii() and owner.isdigit() and pid_alive(int(owner), None):
                return AttemptState(phase=Phase.PENDING, **running)  # it took the gate: its record follows
        if mtime is None and status_path.exists():
            # Its verdict landed between the two looks (it writes status.json, then exits): read it.
            return self.one(aid, d)
        # The supervisor died without a verdict: a lost node (Z3). Its worker
        # must not keep writing into the range's data under the next attempt.
        if worker.get("pid") and pid_alive(worker["pid"], worker.get("create_time")):
            try:
                os.killpg(worker["pid"], signal.SIGKILL)
            except OSError:
                pass
        why = self.disk_full()
        message = "supervisor vanished" + (f" ({why})" if why else "")
        return AttemptState(phase=Phase.FINISHED, observation=Observation(node_gone=True, message=message), **running)
