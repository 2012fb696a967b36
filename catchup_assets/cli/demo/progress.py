"""The demo's progress bar, drawn by a thread of its own from durable state while a run executes."""

from __future__ import annotations

import sys
import threading
import time
from typing import TextIO

from catchup_assets.cli.demo.observe import RangeStates, observe
from catchup_assets.core.dispatch.results import Status
from catchup_assets.defs.resources import CatchupResource


class ProgressBar:
    """Ranges done / in flight / condemned on one line (a line every few seconds off a terminal)."""

    def __init__(self, label: str, total: int, stream: TextIO = sys.stderr):
        self.label, self.total, self.stream = label, total, stream
        self.tty = stream.isatty()
        self.last_print = 0.0
        self.last_text = ""

    def __call__(self, s: Status, final: bool = False) -> None:
        width = 30
        filled = int(width * s.completed / max(self.total, 1))
        bar = "#" * filled + "-" * (width - filled)
        text = (
            f"{self.label} [{bar}] done {s.completed}/{self.total}  in flight {s.in_flight}  "
            f"queued {s.queued}  condemned {s.condemned}"
        )
        now = time.monotonic()
        if self.tty:
            self.stream.write("\r" + text)
            self.stream.flush()
        elif (now - self.last_print >= 5 or final) and text != self.last_text:
            self.stream.write(text + "\n")
            self.stream.flush()
            self.last_print, self.last_text = now, text

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")


class Poller(threading.Thread):
    """Draws the progress bar from durable state while the run executes in the main thread."""

    def __init__(self, bar: ProgressBar, catchup: CatchupResource, mission: str, keys: list[str], every: float = 0.5):
        super().__init__(name=f"progress-{mission}", daemon=True)
        self.bar, self.catchup, self.mission, self.keys, self.every = bar, catchup, mission, keys, every
        self.finished = threading.Event()
        self.backend = catchup.backend_for(mission)

    def run(self) -> None:
        while not self.finished.wait(self.every):
            try:
                self.bar(observe(self.catchup, self.mission, self.keys, self.backend).status(len(self.keys)))
            except Exception:  # noqa: BLE001 - a torn read costs one frame of the bar, never the run
                continue

    def stop(self) -> RangeStates:
        self.finished.set()
        self.join()
        states = observe(self.catchup, self.mission, self.keys, self.backend)
        self.bar(states.status(len(self.keys)), final=True)
        self.bar.close()
        return states
