"""What one simulated attempt does: the script a test hands the kubelet.

A test decides per attempt (`script(job) -> Script`) how the pod behaves;
the kubelet turns that into the statuses, logs and stats the real cluster
would report. `duration` is when the run ends, however it ends: a normal
exit, an explicit OOM, an eviction or a disruption. A memory curve whose rss
crosses the container's memory limit OOMs the pod at the crossing, and an
ephemeral curve above the containers' ephemeral-storage limits evicts it, so
a test of memory escalation (L6) can say "this range needs 5 GiB" and let the
limits decide.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from catchup_assets.core.units import GiB, MiB
from catchup_assets.sim import core_log
from catchup_assets.sim.core_log import UNTRUSTED, log_line, tx_apply_report


@dataclass(frozen=True)
class Usage:
    rss: int  # anon memory: what an OOM is about (L19)
    working_set: int  # includes active page cache, so it can dwarf rss
    ephemeral: int = 0  # bytes written to the pod's writable layers and emptyDirs
    usage: int | None = None  # cgroup usage incl. inactive cache; >= working_set

    @property
    def usage_bytes(self) -> int:
        return self.usage if self.usage is not None else max(self.working_set, self.rss)


# Points (elapsed seconds, Usage), linearly interpolated, flat beyond the ends.
Curve = Sequence[tuple[float, Usage]] | Callable[[float], Usage]
Line = str | tuple[float, str]

DISRUPTION_MESSAGES = {
    "TerminationByKubelet": "Pod was terminated in response to imminent node shutdown.",
    "PreemptionByScheduler": "default-scheduler: preempting to accommodate a higher priority pod",
    "DeletionByTaintManager": "Taint manager: deleting due to NoExecute taint",
    "EvictionByEvictionAPI": "Eviction API: evicting",
    "DeletionByPodGC": "PodGC: node no longer exists",
}


@dataclass(frozen=True)
class Script:
    duration: float = 30.0
    exit_code: int = 0
    start_delay: float = 0.0  # scheduled -> container started (image pull, mounts)
    lines: Sequence[Line] | None = None  # None: DEFAULT_LINES; "{now}" becomes the core stamp
    memory: Curve | None = None  # None: default_memory(duration)
    oom: bool = False  # OOMKilled (exit 137) at `duration`
    disrupt: str | None = None  # DisruptionTarget reason at `duration`, see DISRUPTION_MESSAGES
    disrupt_mode: str = "exit"  # "exit" | "delete" | "node_gone"
    disrupt_exit_code: int = 3  # stellar-core drains after SIGTERM and exits 3
    # Evicted at `duration` for its disk: over its own ephemeral-storage limit if it has
    # one, else as the disk hog of a node short of disk (node pressure).
    evict_ephemeral: bool = False
    evict_memory_pressure: bool = False  # evicted at `duration`: the node ran short of memory
    image_pull_error: bool = False  # ErrImagePull / ImagePullBackOff, forever
    missing_configmap: str | None = None  # CreateContainerConfigError naming this configmap
    sigterm_exit_code: int = 143  # exit on a deadline's or controller's SIGTERM (3 if it drains)
    grace: float = 1.0  # seconds a terminating pod stays visible before it exits or goes
    no_pod: bool = False  # the Job fails BackoffLimitExceeded and never gets a pod
    reject: str | None = None  # admission refuses the pod with this message (FailedCreate)

    def __post_init__(self) -> None:
        if self.disrupt is not None and self.disrupt not in DISRUPTION_MESSAGES:
            raise ValueError(f"unknown disruption reason {self.disrupt!r}")
        if self.disrupt_mode not in ("exit", "delete", "node_gone"):
            raise ValueError(f"unknown disrupt_mode {self.disrupt_mode!r}")

    def curve(self) -> Curve:
        return self.memory if self.memory is not None else default_memory(self.duration)

    def timed_lines(self) -> list[tuple[float, str]]:
        """(offset from container start, text); bare strings spread over the run."""
        raw = DEFAULT_LINES if self.lines is None else self.lines
        step = self.duration / max(1, len(raw))
        return sorted(
            ((item if isinstance(item, tuple) else (i * step, item)) for i, item in enumerate(raw)), key=lambda p: p[0]
        )


def default_memory(duration: float) -> list[tuple[float, Usage]]:
    """Peak during bucket apply (a third in), lower through replay, cache keeps growing."""
    return [
        (0.0, Usage(64 * MiB, 96 * MiB, 0)),
        (duration * 0.3, Usage(1 * GiB, 3 * GiB, 4 * GiB)),
        (duration * 0.5, Usage(600 * MiB, 3 * GiB, 6 * GiB)),
        (duration, Usage(600 * MiB, 3 * GiB, 8 * GiB)),
    ]


def usage_at(curve: Curve, elapsed: float) -> Usage:
    if callable(curve):
        return curve(elapsed)
    points = list(curve)
    if not points or elapsed <= points[0][0]:
        return points[0][1] if points else Usage(0, 0, 0)
    for (t0, a), (t1, b) in zip(points, points[1:], strict=False):
        if elapsed <= t1:
            f = 0.0 if t1 == t0 else (elapsed - t0) / (t1 - t0)
            mix = lambda x, y, f=f: int(x + (y - x) * f)  # noqa: E731
            usage = None if a.usage is None or b.usage is None else mix(a.usage, b.usage)
            return Usage(mix(a.rss, b.rss), mix(a.working_set, b.working_set), mix(a.ephemeral, b.ephemeral), usage)
    return points[-1][1]


def first_crossing(curve: Curve, field: str, limit: float, horizon: float) -> float | None:
    """Earliest elapsed time in [0, horizon] where `field` exceeds limit, or None."""

    def value(t: float) -> float:
        return getattr(usage_at(curve, t), field)

    if value(0.0) > limit:
        return 0.0
    if callable(curve):
        # Sampled: a callable curve has no segments to solve.
        steps = max(1, math.ceil(horizon))
        for i in range(1, steps + 1):
            t = min(horizon, i * horizon / steps)
            if value(t) > limit:
                return t
        return None
    points = [(t, getattr(u, field)) for t, u in curve]
    for (t0, v0), (t1, v1) in zip(points, points[1:], strict=False):
        if t0 >= horizon:
            break
        if v1 > limit >= v0 and t1 > t0:
            t = t0 + (limit - v0) / (v1 - v0) * (t1 - t0)
            return t if t <= horizon else None
    return None


def _core(partition: str, message: str, level: str = "INFO") -> str:
    return log_line(partition, level, message, when="{now}")


# A fresh start of one range as stellar-core logs it (formats: core_log.py).
DEFAULT_LINES: tuple[str, ...] = (
    "{now} [default INFO] Config from /etc/catchup/stellar-core.cfg",
    _core("History", UNTRUSTED, "WARNING"),
    _core("History", "Starting catchup with configuration:"),
    "  lastClosedLedger: 1",
    "  toLedger: 1000063",
    "  count: 16320",
    _core("History", core_log.has_download(983743)),
    _core("History", "Catching up to ledger 1000063: Downloading and verifying buckets: 983743"),
    _core("History", core_log.APPLYING_BUCKETS),
    _core("History", core_log.buckets_estimated(2 * GiB)),
    _core("History", core_log.BUCKETS_DONE),
    _core(
        "History",
        "Catching up to ledger 1000063: Download & apply checkpoints: num checkpoints left to apply:255 (0% done)",
    ),
    _core("History", core_log.replay_checkpoint(983807)),
    _core("Tx", "applying ledger 1000063 (txs:412, ops:830)"),
    _core("History", "Catchup finished"),
    _core("default", "*"),
    _core("default", "* Catchup finished."),
    _core("default", "*"),
    _core("default", "Application destructing"),
    *tx_apply_report(1234567, 1.47073e06),
    _core("default", "Application destroyed"),
)
