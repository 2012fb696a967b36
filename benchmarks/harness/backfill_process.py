"""What benchmarks/dagster_backfill.py does around the processes it starts: the environment the code server
and the run processes inherit, the notes they append (JSON lines, harness/dagster_location.py), waiting on them,
ending those left at the end, and the CPU the rest of the machine used meanwhile."""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path

import psutil


@contextlib.contextmanager
def environment(values: dict[str, str | None]):
    """Set (None: unset) environment variables for the block; the code server and the run processes inherit them."""
    saved = {k: os.environ.get(k) for k in values}
    for k, v in values.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def read_notes(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line being written
            out.append(json.loads(line))
    return out


def first(notes: list[dict], event: str, pid: int | None = None) -> dict | None:
    return next((n for n in notes if n["event"] == event and (pid is None or n["pid"] == pid)), None)


def wait_until(check, timeout: float, what: str, interval: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(interval)
    raise TimeoutError(f"{what}: not within {timeout:.0f} s")


class OtherCpu(threading.Thread):
    """CPU-seconds used by processes outside this benchmark's process tree, sampled every `interval` s."""

    def __init__(self, interval: float = 1.0):
        super().__init__(daemon=True)
        self.interval = interval
        self.started = time.time()
        self.first: dict[tuple[int, float], float] = {}
        self.last: dict[tuple[int, float], float] = {}
        self.done = threading.Event()

    def sample(self) -> None:
        me = psutil.Process()
        ours = {me.pid, *(c.pid for c in me.children(recursive=True))}
        for p in psutil.process_iter(["cpu_times", "create_time"]):
            times, created = p.info["cpu_times"], p.info["create_time"]
            if p.pid in ours or times is None or created is None:
                continue
            key, used = (p.pid, created), times.user + times.system
            self.first.setdefault(key, used if created < self.started else 0.0)
            self.last[key] = used

    def run(self) -> None:
        while not self.done.wait(self.interval):
            with contextlib.suppress(psutil.Error):
                self.sample()

    def stop(self) -> float:
        self.done.set()
        self.join()
        with contextlib.suppress(psutil.Error):
            self.sample()
        return sum(self.last[k] - self.first[k] for k in self.last)


def stop_leftovers(before: set[int]) -> int:
    """End processes this benchmark started that are still alive (by pid, descendants of this process)."""
    left = [p for p in psutil.Process().children(recursive=True) if p.pid not in before]
    for p in left:
        with contextlib.suppress(psutil.Error):
            p.terminate()
    _, alive = psutil.wait_procs(left, timeout=10)
    for p in alive:
        with contextlib.suppress(psutil.Error):
            p.kill()
    return len(left)
