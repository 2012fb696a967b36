"""What a cluster does to a local attempt uninvited: spot reclaims and the kubelet's disk evictions (L4, L15).

A stand-in, opt-in: the local backend builds a `Disruptions` only when its
caller asks for one (a `disruption_rate` > 0, disruptions aimed at attempts,
a disk limit or a node's disk), and an attempt's supervisor builds an
`Emulator` only when the attempt's launch carries what it asked for (or its
spec forces a reclaim). An ordinary local run imports nothing from here.

The backend's half writes, per attempt, the fields of its launch the
supervisor's half reads: when to reclaim it (drawn the same every time), on
which line of its log, and the disk limits a kubelet would evict it over.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from catchup_assets.core.classify import evictions
from catchup_assets.core.dispatch.ports import AttemptSpec

NODE_SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
EVICTION_GRACE_SECONDS = 1.0  # the kubelet's immediateEvictionGracePeriodSeconds
HARD_EVICTION_SHARE = 0.10  # the kubelet's default hard threshold: nodefs.available<10%


def disruption_delay(seed: int, rate: float, window: tuple[float, float], range_key: str, attempt: int) -> float | None:
    """Seconds after start to disrupt this attempt, or None; the same every time."""
    if rate <= 0:
        return None
    digest = hashlib.sha256(f"{seed}\0{range_key}\0{attempt}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    if rng.random() >= rate:
        return None
    return rng.uniform(*window)


@dataclass(frozen=True)
class Disruptions:
    """What a local backend was asked to put its attempts through (the backend's half)."""

    rate: float = 0.0
    seed: int = 0
    window: tuple[float, float] = (0.5, 3.0)
    # attempt id -> seconds: a spot reclaim aimed at one attempt (demos, tests)
    at: Mapping[str, float] = field(default_factory=dict)
    # attempt id -> a line of its log: reclaimed the moment the worker prints it
    on_line: Mapping[str, str] = field(default_factory=dict)
    # The kubelet's disk evictions: over the attempt's own limit, or filling a
    # node it has to itself (disk_eviction).
    ephemeral_limit_bytes: int | None = None
    node_disk_bytes: int | None = None

    def launch(self, spec: AttemptSpec) -> dict:
        """The attempt's launch fields its supervisor's `Emulator` reads."""
        return {
            "disrupt_after_seconds": self.at.get(
                spec.attempt_id, disruption_delay(self.seed, self.rate, self.window, spec.range_key, spec.attempt)
            ),
            "disrupt_on_line": self.on_line.get(spec.attempt_id),
            # Like the kubelet in ephemeral mode: the attempt's sized disk, once this node limits disk at all.
            "ephemeral_limit_bytes": (spec.ephemeral_bytes or self.ephemeral_limit_bytes)
            if self.ephemeral_limit_bytes is not None
            else None,
            "node_disk_bytes": self.node_disk_bytes,
        }


def disk_eviction(used: int, launch: dict) -> str | None:
    """The kubelet's message if `used` bytes of the attempt's data get it evicted, else None.

    `ephemeral_limit_bytes` is the pod's own limit; `node_disk_bytes` the disk of a
    node the pod has to itself (a pooled pod, L15), evicted as its disk hog.
    """
    limit = launch.get("ephemeral_limit_bytes")
    if limit and used > limit:
        return evictions.POD_EPHEMERAL_FMT.format(limit=evictions.quantity(limit))
    disk = launch.get("node_disk_bytes")
    if disk and disk - used < disk * HARD_EVICTION_SHARE:
        return evictions.node_pressure_message(
            evictions.DISK, int(disk * HARD_EVICTION_SHARE), max(0, disk - used), "catchup", used, 0
        )
    return None


class LogTrigger:
    """Fires once the worker's log holds `line` (a substring); never if `line` is None."""

    def __init__(self, path: Path, line: str | None) -> None:
        self.path, self.line = path, line
        self._offset, self._tail, self._fired = 0, b"", False

    def fired(self) -> bool:
        if self.line is None or self._fired:
            return self._fired
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return False
        self._offset += len(data)
        needle = self.line.encode()
        self._fired = needle in self._tail + data
        self._tail = (self._tail + data)[-len(needle) :]
        return self._fired


@dataclass(frozen=True)
class Interruption:
    """The supervisor stops its worker: SIGTERM, then SIGKILL after `grace` seconds."""

    why: str
    grace: float
    pod_reason: str
    conditions: tuple[str, ...] = ()
    before: tuple[str, ...] = ()  # messages of the verdict that come before `why`


class Emulator:
    """One attempt's disruptions, in its supervisor (the supervisor's half)."""

    def __init__(self, launch: dict, forced: str | None, log_path: Path) -> None:
        self.launch = launch
        # A spec may force the injected disruption, e.g. for a demo of one range.
        disrupt = forced if forced is not None else launch.get("disrupt_after_seconds")
        self.disrupt = float(disrupt) if disrupt not in (None, "") else None
        # A reclaim aimed at a moment of the attempt's own, not at a time: "once the worker printed X".
        self.trigger = LogTrigger(log_path, launch.get("disrupt_on_line"))
        self.evicted: str | None = None

    def walked(self, used: int) -> None:
        """The attempt's data took `used` bytes at the last walk of its directory."""
        self.evicted = self.evicted or disk_eviction(used, self.launch)

    def due(self, elapsed: float, grace: float) -> Interruption | None:
        """What stops the worker now, `elapsed` seconds in; None to let it run."""
        if self.evicted is not None:
            # As the kubelet evicts: Failed/Evicted, its message, a 1 s grace;
            # DisruptionTarget only when the node ran short (evictions.py).
            conditions = ("DisruptionTarget", "TerminationByKubelet")
            return Interruption(
                self.evicted,
                EVICTION_GRACE_SECONDS,
                evictions.REASON,
                conditions if evictions.node_pressure(evictions.REASON, self.evicted) else (),
            )
        if (self.disrupt is not None and elapsed >= self.disrupt) or self.trigger.fired():
            # A spot reclaim as the node's graceful shutdown reports it (nodeshutdown manager).
            why = (
                f"disruption injected after {elapsed:.2f} s"
                if self.trigger.line is None
                else f"disruption injected once the worker printed {self.trigger.line!r}"
            )
            return Interruption(
                why, grace, "Terminated", ("DisruptionTarget", "TerminationByKubelet"), (NODE_SHUTDOWN_MESSAGE,)
            )
        return None
