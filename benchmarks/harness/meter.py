"""What a running dispatcher costs, pass by pass and by activity, measured from outside it.

The meter wraps methods of one real `Dispatcher` (and its backend) on the
instance, so the code that runs is the production code unchanged. CPU is
`time.process_time()`: every thread of this process, which is the
dispatcher's alone when whatever it talks to runs in other processes (the
simulated cluster, the local supervisors).
"""

from __future__ import annotations

import cProfile
import io
import math
import os
import pstats
import resource
import sys
import time
import tracemalloc
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import psutil


@dataclass(frozen=True)
class PassRow:
    cpu: float  # process CPU seconds of the pass
    wall: float
    activity: dict[str, float]  # process CPU seconds of the pass by activity (nested ones count twice)
    in_flight: int  # after the pass
    queued: int
    submitted: int  # events of this pass
    finished: int
    flushed: int  # in-flight peak records written
    rss: int  # bytes, after the pass
    max_rss: int  # bytes, the process's high-water mark so far (ru_maxrss)
    instrumented: str = ""  # "profiled" | "traced": its CPU and later RSS are not the dispatcher's alone

    @property
    def reconcile_read(self) -> float:
        """observe() without the log reads (pods about to go) and kubelet summaries in it: the per-pass read."""
        a = self.activity
        return a.get("observe", 0.0) - a.get("log polls", 0.0) - a.get("kubelet summaries", 0.0)


class DispatcherMeter:
    def __init__(
        self,
        dispatcher,
        backend,
        parts: tuple[tuple[object, str, str], ...] = (),
        profile_steady_pass: bool = False,
        trace_steady_pass: bool = False,
    ):
        """`parts`: (object, method, activity) to time as well, e.g. work nested in observe.

        The first steady pass may be profiled and the third traced with tracemalloc
        (one pass only: it triples the cost of what it watches, and its own memory
        stays in the RSS of every later pass).
        """
        self.dispatcher = dispatcher
        self.passes: list[PassRow] = []
        self.cpu: Counter[str] = Counter()  # process CPU seconds by activity
        self.events: Counter[str] = Counter()
        self.profile: str | None = None
        self.trace: Trace | None = None
        self._profile_wanted = profile_steady_pass
        self._trace_wanted = trace_steady_pass
        self._steady_seen = 0
        self._process = psutil.Process()
        self._writes = 0
        self._wrap(dispatcher.submitter, "submit", "submit", count=lambda r: True)
        self._wrap(dispatcher.finisher, "finish", "finish", count=lambda r: r is True)
        self._wrap(backend, "observe", "observe")
        for obj, name, activity in parts:
            self._wrap(obj, name, activity)
        write = dispatcher.records.write

        def counted_write(*a, **kw):
            self._writes += 1
            return write(*a, **kw)

        dispatcher.records.write = counted_write
        flush = dispatcher.finisher.flush_live

        def timed_flush(st):
            before, t0 = self._writes, time.process_time()
            flush(st)
            self.cpu["flush"] += time.process_time() - t0
            self.events["flush"] += self._writes - before

        dispatcher.finisher.flush_live = timed_flush
        pass_once = dispatcher.pass_once
        dispatcher.pass_once = lambda: self._pass(pass_once)

    def _wrap(self, obj, name: str, activity: str, count: Callable[[object], bool] | None = None) -> None:
        inner = getattr(obj, name)

        def timed(*a, **kw):
            t0 = time.process_time()
            try:
                result = inner(*a, **kw)
            finally:
                self.cpu[activity] += time.process_time() - t0
            if count is not None and count(result):
                self.events[activity] += 1
            return result

        setattr(obj, name, timed)

    def _steady(self) -> bool:
        """In flight at the cap for the last pass, and past the first reads of the ramp."""
        cap = self.dispatcher.mission.parallelism
        return len(self.passes) >= 2 and self.passes[-1].in_flight == cap and self.passes[-1].queued > 0

    def _pass(self, pass_once):
        before, spent = Counter(self.events), Counter(self.cpu)
        profiler, instrumented = None, ""
        if self._steady():
            self._steady_seen += 1
            if self._steady_seen == 1 and self._profile_wanted:
                profiler, instrumented = cProfile.Profile(), "profiled"
            elif self._steady_seen == 3 and self._trace_wanted:
                tracemalloc.start(1)
                instrumented = "traced"
        tracing = instrumented == "traced"
        t0, w0 = time.process_time(), time.perf_counter()
        if profiler:
            profiler.enable()
        status = pass_once()
        if profiler:
            profiler.disable()
        cpu, wall = time.process_time() - t0, time.perf_counter() - w0
        if profiler:
            self.profile = _top(profiler, wall, status.in_flight)
        if tracing:
            self.trace = Trace.take(status.in_flight, *tracemalloc.get_traced_memory())
            tracemalloc.stop()
        self.passes.append(
            PassRow(
                cpu,
                wall,
                {k: v - spent[k] for k, v in self.cpu.items() if v != spent[k]},
                status.in_flight,
                status.queued,
                self.events["submit"] - before["submit"],
                self.events["finish"] - before["finish"],
                self.events["flush"] - before["flush"],
                self._process.memory_info().rss,
                resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                instrumented,
            )
        )
        return status

    def rss(self) -> int:
        return self._process.memory_info().rss

    def steady_indices(self) -> list[int]:
        """Passes that began with every slot taken and work still queued, after the ramp."""
        cap = self.dispatcher.mission.parallelism
        return [
            i
            for i in range(2, len(self.passes))
            if self.passes[i - 1].in_flight == cap and self.passes[i - 1].queued > 0
        ]

    def steady_passes(self) -> list[PassRow]:
        return [self.passes[i] for i in self.steady_indices()]


class MachineLoad:
    """CPU the rest of the machine used while a block ran, in cores: a loaded machine slows every figure here.

    Everything busy on the machine (`psutil.cpu_times`) minus this process, the
    children it has reaped (supervisors) and `helpers`, live processes of its own
    (the simulated cluster).
    """

    def __init__(self, helpers: tuple[int, ...] = ()):
        self.helpers = [psutil.Process(pid) for pid in helpers]
        self.other_cores = math.nan

    def _mine(self) -> float:
        t = psutil.Process().cpu_times()
        return (
            t.user + t.system + t.children_user + t.children_system + sum(sum(p.cpu_times()[:2]) for p in self.helpers)
        )

    def __enter__(self) -> MachineLoad:
        self._t0, self._busy0, self._mine0 = time.perf_counter(), _busy(), self._mine()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._t0
        other = (_busy() - self._busy0) - (self._mine() - self._mine0)
        self.other_cores = max(0.0, other / wall) if wall > 0 else math.nan


def _busy() -> float:
    t = psutil.cpu_times()
    return sum(t) - t.idle - getattr(t, "iowait", 0.0) - getattr(t, "guest", 0.0) - getattr(t, "guest_nice", 0.0)


@dataclass(frozen=True)
class Trace:
    """tracemalloc over one steady pass: what the pass allocated at most at once, and what of it stayed."""

    in_flight: int
    kept: int  # bytes allocated during the pass and still alive after it
    peak: int  # most bytes allocated during the pass alive at once
    sites: tuple[tuple[str, int], ...]  # (file, bytes kept), largest first

    @classmethod
    def take(cls, in_flight: int, kept: int, peak: int, top: int = 8) -> Trace:
        stats = tracemalloc.take_snapshot().statistics("filename")
        sites = tuple((_short(s.traceback[0].filename), s.size) for s in stats[:top])
        return cls(in_flight, kept, peak, sites)


def _short(path: str) -> str:
    for marker in ("site-packages/", "/catchup_assets/", "/benchmarks/", "/lib/python3"):
        if marker in path:
            return path[path.index(marker) :].lstrip("/").removeprefix("site-packages/")
    return path


def _top(profiler: cProfile.Profile, wall: float, in_flight: int, lines: int = 12) -> str:
    """The pass's profile by cumulative and by own time, the meter's wrappers and long paths left out."""

    def table(order: str) -> str:
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(r"^(?!.*benchmarks/harness/meter\.py)", lines)
        body = out.getvalue()
        body = body[body.find("   ncalls") :].rstrip()
        for prefix in sorted({sys.prefix, sys.base_prefix, os.getcwd()}, key=len, reverse=True):
            body = body.replace(prefix + "/", "")
        return body.replace("lib/python3.11/site-packages/", "")

    return (
        f"cProfile of one steady pass ({in_flight} in flight, {wall:.1f} s under the profiler; its clock is "
        "wall time, so socket reads and lock acquires are waits for the server and the log-poll threads).\n\n"
        f"By cumulative time:\n\n```\n{table('cumulative')}\n```\n\nBy own time:\n\n```\n{table('tottime')}\n```"
    )
