"""Attempts as detached local subprocess trees, with the disk as the registry.

Each attempt is a `supervisor` process in its own session: it survives
the dispatcher, and a new `LocalBackend` over the same `work_dir` finds it
again from the files it keeps (L10). Layout, per mission:

    attempts/<attempt_id>/  spec.json launch.json supervisor.json worker.json
                            peaks.json status.json worker.log supervisor.log
                            start.gate (the supervisor's or a fence's: state.py)
                            identity (the mission nonce's signature of its name)
    data[-<tag>]/<range_key>/  the range's kept data directory, the "PVC" (L3); <tag> from the nonce

Creating the attempt directory is the atomic create; losing it is a 409 (L11), adopted only if the
directory carries the mission's identity (issue 45).
Reading the directories back as attempt states is `registry.py`'s.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import psutil

from catchup_assets.backends.local.leftovers import LocalLeftovers
from catchup_assets.backends.local.leftovers import remove_tree as _remove
from catchup_assets.backends.local.live_log import LocalLiveLog
from catchup_assets.backends.local.registry import Registry, peaks_of
from catchup_assets.backends.local.state import fence, write_json_atomic, write_json_if_absent
from catchup_assets.backends.shipping import ship, split_log
from catchup_assets.core.classify.outcomes import STOP_CONDITION
from catchup_assets.core.dispatch.ports import (
    AlreadyExists,
    AttemptSpec,
    AttemptState,
    Busy,
    Collected,
    DispatchBlocked,
    ForeignObject,
    Phase,
)
from catchup_assets.core.errors import ConfigError
from catchup_assets.core.values.mission_nonce import MissionNonce
from catchup_assets.store.log_archive import archive

log = logging.getLogger(__name__)

ENTRYPOINT = Path(__file__).resolve().parents[1] / "worker" / "entrypoint.sh"
_SAFE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # fullmatch: "$" passes a trailing newline
LOG_CHUNK = 1 << 20


IDENTITY_FILE = "identity"  # the nonce's signature of the attempt directory's name


def _owner(d: Path) -> str:
    """Who made `d`, as the filesystem says: its owner's uid."""
    try:
        return f"owned by uid {d.stat().st_uid}"
    except OSError:
        return "its owner unknown"


def _safe(name: str, what: str) -> str:
    if not isinstance(name, str) or not _SAFE.fullmatch(name):
        raise ConfigError(f"{what} {name!r} is not a safe path component")
    return name


class LocalBackend(LocalLeftovers, LocalLiveLog):  # LocalLiveLog: a live attempt's log (live_log.py)
    def __init__(
        self,
        work_dir: str | os.PathLike,
        mission: str,
        *,
        command: Sequence[str] | None = None,
        env: Mapping[str, str] | None = None,
        sample_interval: float = 0.2,
        disruption_rate: float = 0.0,
        disruption_seed: int = 0,
        disruption_window: tuple[float, float] = (0.5, 3.0),
        terminate_grace: float = 10.0,
        python: str = sys.executable,
        disruptions: Mapping[str, float] | None = None,
        disruption_triggers: Mapping[str, str] | None = None,
        ephemeral_limit_bytes: int | None = None,
        node_disk_bytes: int | None = None,
        min_free_bytes: int = 128 * 1024**2,
        nonce: MissionNonce | Callable[[], MissionNonce] | None = None,
    ) -> None:
        self.mission = _safe(mission, "mission")
        # The mission's nonce (mission.json; issue 45): every attempt directory made carries its signature
        # (IDENTITY_FILE), and one without it is not the mission's: another deployment's sharing this work
        # directory (its default is beside the storage root), or anyone's. None: no check (tests that make
        # their own backend); a deployment's backend (defs/resources/backend.py) always passes it, as a
        # callable asked on first use: constructing a backend does no I/O.
        self._nonce = nonce
        self.root = Path(work_dir) / mission
        self.attempts_dir = self.root / "attempts"
        self.command = list(command) if command is not None else ["sh", str(ENTRYPOINT)]
        self.env = {"STELLAR_CORE": str(Path(sys.executable).parent / "catchup-sim-core")}
        self.env.update(env or {})
        self.sample_interval = sample_interval
        # The stand-in for a cluster's spot reclaims and the kubelet's disk evictions
        # (sim/disruption.py), built only when the caller asks for any.
        self.disruption = None
        if (
            disruption_rate > 0
            or disruptions
            or disruption_triggers
            or ephemeral_limit_bytes is not None
            or node_disk_bytes is not None
        ):
            from catchup_assets.sim.disruption import Disruptions

            self.disruption = Disruptions(
                disruption_rate,
                disruption_seed,
                disruption_window,
                dict(disruptions or {}),
                dict(disruption_triggers or {}),
                ephemeral_limit_bytes,
                node_disk_bytes,
            )
        # Below this much free space in the work directory nothing new starts: a supervisor
        # that cannot write its state dies without a verdict, and every retry would too.
        self.min_free_bytes = min_free_bytes
        self.terminate_grace = terminate_grace
        self.python = python
        # Only caches of immutable files and children to reap: never a source
        # of truth, a restart loses nothing by starting them empty (L10).
        self.registry = Registry(self.attempts_dir, self._disk_full, self._refusal)
        self._children: dict[str, subprocess.Popen] = {}

    @property
    def nonce(self) -> MissionNonce | None:
        if self._nonce is not None and not isinstance(self._nonce, MissionNonce):
            self._nonce = self._nonce()
        return self._nonce

    @property
    def data_root(self) -> Path:
        """The ranges' kept data (the "PVCs"), resumed by their next attempts: with a nonce, under a name
        of the mission's own, so a deployment sharing this work directory never resumes from another's."""
        nonce = self.nonce
        return self.root / ("data" if nonce is None else f"data-{nonce.sign('data', self.mission)[:12]}")

    def data_dir(self, range_key: str) -> Path:
        return self.data_root / _safe(range_key, "range key")

    def attempt_dir(self, attempt_id: str) -> Path:
        return self.attempts_dir / _safe(attempt_id, "attempt id")

    # -- submit -----------------------------------------------------------
    def submit(self, spec: AttemptSpec) -> None:
        if spec.mission != self.mission:
            raise ValueError(f"spec for mission {spec.mission!r} submitted to {self.mission!r}")
        if (why := self._disk_full()) is not None:
            raise DispatchBlocked(f"{why}: new attempts stopped until space is freed")
        d = self.attempt_dir(spec.attempt_id)
        data = self.data_dir(spec.range_key)
        self.attempts_dir.mkdir(parents=True, exist_ok=True)
        self._make_attempt_dir(d)
        data.mkdir(parents=True, exist_ok=True)
        launch = {
            "command": self.command,
            "env": self.env,
            "data_dir": str(data.resolve()),
            "sample_interval": self.sample_interval,
            "terminate_grace": self.terminate_grace,
            "disruption": self.disruption.launch(spec) if self.disruption is not None else None,
        }
        write_json_atomic(d / "launch.json", launch)
        spec_json = dataclasses.asdict(spec)
        spec_json["env"] = dict(spec.env)
        write_json_atomic(d / "spec.json", spec_json)  # last before start: "submitted"
        with open(d / "supervisor.log", "ab") as out:
            proc = subprocess.Popen(
                [self.python, "-m", "catchup_assets.backends.local.supervisor", str(d.resolve())],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                cwd=str(d),
            )
        self._children[spec.attempt_id] = proc
        try:
            ct = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            return  # already gone; the supervisor's own record (or its absence) decides
        # The supervisor writes the same record itself; this one covers a slow start.
        write_json_if_absent(d / "supervisor.json", {"pid": proc.pid, "create_time": ct})

    def _make_attempt_dir(self, d: Path) -> None:
        """The attempt's directory, created atomically (the local 409, L11); with a nonce, made whole with
        its identity file in a hidden directory first and renamed into place, so no reader ever sees it
        without one. One there already is adopted only if it carries the mission's identity."""
        if self.nonce is None:
            try:
                os.mkdir(d)
            except FileExistsError:
                raise AlreadyExists(d.name) from None
            return
        tmp = d.with_name(f".new-{d.name}-{os.getpid()}-{time.monotonic_ns()}")
        os.mkdir(tmp)
        (tmp / IDENTITY_FILE).write_text(self.nonce.sign("attempt", self.mission, d.name))
        try:
            os.rename(tmp, d)  # onto an empty directory it replaces it; onto a made one it fails
            return
        except OSError as exc:
            shutil.rmtree(tmp, ignore_errors=True)
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                raise
        if (why := self._refusal(d.name, d)) is not None:
            raise ForeignObject(f"attempt directory {d} ({_owner(d)}) is not this mission's: {why}")
        raise AlreadyExists(d.name)

    def _refusal(self, aid: str, d: Path) -> str | None:
        """Why the attempt directory `d` is not this mission's; None if it is (or there is no nonce to check)."""
        if self.nonce is None:
            return None
        try:
            tag = (d / IDENTITY_FILE).read_text()[:128]
        except FileNotFoundError:
            return f"it has no {IDENTITY_FILE} file"
        except (OSError, UnicodeDecodeError) as exc:
            return f"its {IDENTITY_FILE} cannot be read: {exc}"
        if not self.nonce.signed(tag, "attempt", self.mission, aid):
            return "its identity is not this mission's (another deployment's, or forged)"
        return None

    # -- observe ----------------------------------------------------------
    def observe(self) -> list[AttemptState]:
        for aid, p in list(self._children.items()):
            if p.poll() is not None:
                del self._children[aid]  # reaped: a zombie must not look alive
        return self.registry.scan()

    def _disk_full(self) -> str | None:
        """Why the work directory cannot take an attempt, or None if it can."""
        where = self.root
        while not where.exists() and where != where.parent:
            where = where.parent  # not made yet: its filesystem is its nearest parent's
        try:
            free = shutil.disk_usage(where).free
        except OSError:
            return None  # not there yet: submit creates it and says so if it cannot
        if free < self.min_free_bytes:
            return f"work directory {self.root} is full: {free} bytes free, below min_free_bytes {self.min_free_bytes}"
        return None

    # -- collect ----------------------------------------------------------
    def collect(self, state: AttemptState, log_url: Callable[[int], str]) -> Collected:
        """Archive the attempt's own log (gzip), store the earlier logs it shipped (L31),
        parse its own lines, merge peaks. Idempotent."""
        d = self.attempt_dir(state.attempt_id)
        peaks = state.peaks
        status = self.registry.json(state.attempt_id, d / "status.json") or {}
        peaks = peaks.merge(peaks_of(status.get("peaks"))).merge(
            peaks_of(self.registry.json(state.attempt_id, d / "peaks.json"))
        )
        src = d / "worker.log"
        if not src.exists():
            return Collected(peaks=peaks)
        # The worker printed the earlier attempts' files it found in the data dir first.
        parts = split_log(src, d / "own.log")
        log_dest = log_url(state.attempt)
        archive(parts.own, log_dest)
        if stored := ship(parts, state.attempt, log_url):
            log.info("attempt %s shipped the logs of attempts %s", state.attempt_id, stored)
        facts = None
        try:
            from catchup_assets.core.measure.logparse import iter_lines, parse_worker_log

            with open(parts.own, "rb") as f:
                facts = parse_worker_log(
                    iter_lines(iter(lambda: f.read(LOG_CHUNK), b"")), source=f"attempt {state.attempt_id}"
                )
        except Exception as e:  # noqa: BLE001 - a log never kills the pass (L29); the archive is kept
            log.warning("log of %s not parsed: %s", state.attempt_id, e)
        if facts is None:
            return Collected(peaks=peaks, log_path=log_dest)
        return Collected.from_log(facts, peaks, log_dest)

    # -- release ----------------------------------------------------------
    def release(self, state: AttemptState) -> None:
        """Delete a finished attempt's directory; refuses one still running (L2)."""
        aid = state.attempt_id
        d = self.attempt_dir(aid)
        now = self.registry.one(aid, d) if d.exists() else None
        if now is not None and now.live:
            raise Busy(f"attempt {aid} is {now.phase}; not released")
        _remove(d)
        self.registry.forget(aid)
        self._children.pop(aid, None)

    def release_range(self, range_key: str) -> None:
        """Delete the range's data directory (L3); refuses while an attempt runs on it."""
        live = [s.attempt_id for s in self.registry.of_range(_safe(range_key, "range key")) if s.live]
        if live:
            raise Busy(f"range {range_key} has live attempts {live}; data kept")
        _remove(self.data_dir(range_key))
        for e in os.scandir(self.data_root) if self.data_root.exists() else ():
            if e.name.startswith(".trash-"):
                shutil.rmtree(e.path, ignore_errors=True)  # an interrupted release

    # -- shutdown ---------------------------------------------------------
    def shutdown(self, grace: float) -> list[str]:
        """SIGTERM every live supervisor (it stops its worker and still writes its
        verdict, `stopped`: the operator's, charged to no budget), wait at most
        `grace` seconds; return the attempts still alive (L37).

        An attempt whose supervisor has not recorded itself yet (the orchestrator
        was stopped mid-submit) is fenced so it never starts; one that starts
        anyway is seen on the next look and stopped too.
        """
        signalled: set[str] = set()
        end = time.monotonic() + grace
        while True:
            for aid, p in list(self._children.items()):
                if p.poll() is not None:
                    del self._children[aid]
            alive = []
            for st in self.observe():
                if not st.live:
                    continue
                d = self.attempt_dir(st.attempt_id)
                sup = self.registry.json(st.attempt_id, d / "supervisor.json")
                if st.phase is Phase.PENDING and sup is None:
                    if fence(d, "stopped by the operator before its supervisor started", (STOP_CONDITION,)):
                        continue
                    alive.append(st.attempt_id)  # its supervisor took the gate first: signalled once recorded
                    continue
                if sup is None or sup["pid"] == os.getpid():
                    continue
                alive.append(st.attempt_id)
                # Signalled before its handlers are in place, a starting supervisor would die without a
                # verdict: it is signalled once its own record (with "node") says they are, a moment later.
                if st.attempt_id not in signalled and "node" in sup:
                    signalled.add(st.attempt_id)
                    try:
                        os.kill(sup["pid"], signal.SIGTERM)
                    except ProcessLookupError:
                        pass
            if not alive or time.monotonic() >= end:
                return sorted(alive)
            time.sleep(0.05)
